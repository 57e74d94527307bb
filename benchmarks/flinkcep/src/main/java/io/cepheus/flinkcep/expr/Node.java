package io.cepheus.flinkcep.expr;

import java.util.ArrayList;
import java.util.List;

/** Expression AST. Each node evaluates itself; the value rules live in {@link Values}. */
interface Node {
    Object eval(Scope s);

    /** Calls {@code visitor} on this node and every node below it. */
    default void walk(java.util.function.Consumer<Node> visitor) {
        visitor.accept(this);
    }

    record Literal(Object value) implements Node {
        public Object eval(Scope s) {
            return value;
        }
    }

    /** A field of the event under test: {@code price}. */
    record Ident(String name) implements Node {
        public Object eval(Scope s) {
            return Values.member(s.env, name);
        }
    }

    /** {@code #}: the current element inside a predicate. */
    record Pointer() implements Node {
        public Object eval(Scope s) {
            if (!s.hasPointer) {
                throw new EvalException("# used outside a predicate");
            }
            return s.pointer;
        }
    }

    /** {@code x.f}, or {@code x?.f} (optional: nil when x is nil). */
    record Member(Node target, String name, boolean optional) implements Node {
        public Object eval(Scope s) {
            Object t = target.eval(s);
            if (t == null && optional) {
                return null;
            }
            return Values.member(t, name);
        }

        public void walk(java.util.function.Consumer<Node> v) {
            v.accept(this);
            target.walk(v);
        }
    }

    record Index(Node target, Node index) implements Node {
        public Object eval(Scope s) {
            return Values.index(target.eval(s), index.eval(s));
        }

        public void walk(java.util.function.Consumer<Node> v) {
            v.accept(this);
            target.walk(v);
            index.walk(v);
        }
    }

    record ArrayLit(List<Node> items) implements Node {
        public Object eval(Scope s) {
            List<Object> out = new ArrayList<>(items.size());
            for (Node n : items) {
                out.add(n.eval(s));
            }
            return out;
        }

        public void walk(java.util.function.Consumer<Node> v) {
            v.accept(this);
            items.forEach(n -> n.walk(v));
        }
    }

    record Unary(String op, Node operand) implements Node {
        public Object eval(Scope s) {
            Object x = operand.eval(s);
            switch (op) {
                case "!":
                case "not":
                    return !Values.bool(x, op);
                case "-":
                    return Values.negate(x);
                case "+":
                    Values.number(x, "+");
                    return x;
                default:
                    throw new EvalException("unknown unary operator " + op);
            }
        }

        public void walk(java.util.function.Consumer<Node> v) {
            v.accept(this);
            operand.walk(v);
        }
    }

    record Binary(String op, Node left, Node right) implements Node {
        public Object eval(Scope s) {
            switch (op) {
                // Logical operators short-circuit, so "type == \"SubEvent\" && volume > 5.0"
                // never compares a plain event's nil volume.
                case "&&":
                case "and":
                    return Values.bool(left.eval(s), op) && Values.bool(right.eval(s), op);
                case "||":
                case "or":
                    return Values.bool(left.eval(s), op) || Values.bool(right.eval(s), op);
                case "??": {
                    Object l = left.eval(s);
                    return l != null ? l : right.eval(s);
                }
                default:
                    return Values.binary(op, left.eval(s), right.eval(s));
            }
        }

        public void walk(java.util.function.Consumer<Node> v) {
            v.accept(this);
            left.walk(v);
            right.walk(v);
        }
    }

    record Conditional(Node cond, Node then, Node otherwise) implements Node {
        public Object eval(Scope s) {
            return Values.bool(cond.eval(s), "?:") ? then.eval(s) : otherwise.eval(s);
        }

        public void walk(java.util.function.Consumer<Node> v) {
            v.accept(this);
            cond.walk(v);
            then.walk(v);
            otherwise.walk(v);
        }
    }

    /** A builtin call; arguments are evaluated by the builtin (predicates are evaluated per element). */
    record Call(String name, List<Node> args) implements Node {
        public Object eval(Scope s) {
            return Builtins.call(name, args, s);
        }

        public void walk(java.util.function.Consumer<Node> v) {
            v.accept(this);
            args.forEach(n -> n.walk(v));
        }
    }
}
