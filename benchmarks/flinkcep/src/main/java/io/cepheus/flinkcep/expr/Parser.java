package io.cepheus.flinkcep.expr;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Precedence-climbing parser for the expr-lang subset. Precedences and associativity are
 * expr-lang's (parser/operator): or 10, and 15, comparisons/in/contains/startsWith/endsWith/
 * matches 20, + - 30, * / % 60, ** ^ 100 (right), ?? 500; unary not/! 50, unary - + 90; the
 * ternary {@code ?:} is lowest.
 */
final class Parser {
    private static final Map<String, Integer> BINARY = Map.ofEntries(
            Map.entry("or", 10), Map.entry("||", 10),
            Map.entry("and", 15), Map.entry("&&", 15),
            Map.entry("==", 20), Map.entry("!=", 20), Map.entry("<", 20), Map.entry(">", 20),
            Map.entry("<=", 20), Map.entry(">=", 20), Map.entry("in", 20), Map.entry("not in", 20),
            Map.entry("matches", 20), Map.entry("contains", 20), Map.entry("startsWith", 20),
            Map.entry("endsWith", 20),
            Map.entry("+", 30), Map.entry("-", 30),
            Map.entry("*", 60), Map.entry("/", 60), Map.entry("%", 60),
            Map.entry("**", 100), Map.entry("^", 100),
            Map.entry("??", 500));

    /** Builtins whose second argument is a predicate evaluated per element. */
    private static final Set<String> PREDICATE_FUNCS =
            Set.of("sum", "count", "all", "any", "none", "one", "filter", "map");

    /** Allowed argument counts {min, max}; max -1 means unbounded. */
    private static final Map<String, int[]> ARITY = Map.ofEntries(
            Map.entry("ctx", new int[] {1, 1}), Map.entry("len", new int[] {1, 1}),
            Map.entry("sum", new int[] {1, 2}), Map.entry("count", new int[] {1, 2}),
            Map.entry("all", new int[] {2, 2}), Map.entry("any", new int[] {2, 2}),
            Map.entry("none", new int[] {2, 2}), Map.entry("one", new int[] {2, 2}),
            Map.entry("filter", new int[] {2, 2}), Map.entry("map", new int[] {2, 2}),
            Map.entry("first", new int[] {1, 1}), Map.entry("last", new int[] {1, 1}),
            Map.entry("abs", new int[] {1, 1}), Map.entry("min", new int[] {1, -1}),
            Map.entry("max", new int[] {1, -1}), Map.entry("mean", new int[] {1, -1}),
            // avg is Cepheus's name for mean (rules: "avg"), not an expr-lang builtin.
            Map.entry("avg", new int[] {1, -1}),
            Map.entry("lower", new int[] {1, 1}), Map.entry("upper", new int[] {1, 1}));

    private final String src;
    private final List<Token> tokens;
    private final Set<String> fields;
    private int pos;
    private int predicateDepth;

    private Parser(String src, Set<String> fields) {
        this.src = src;
        this.tokens = Lexer.tokenize(src);
        this.fields = fields;
    }

    static Node parse(String src, Set<String> fields) {
        Parser p = new Parser(src, fields);
        Node n = p.ternary();
        if (p.peek().kind() != Token.Kind.EOF) {
            throw p.error("unexpected '" + p.peek().text() + "'");
        }
        return n;
    }

    private Token peek() {
        return tokens.get(pos);
    }

    private Token peekAt(int k) {
        return tokens.get(Math.min(pos + k, tokens.size() - 1));
    }

    private Token advance() {
        return tokens.get(pos++);
    }

    private void expectPunct(String p) {
        if (!peek().isPunct(p)) {
            throw error("expected '" + p + "' but found '" + peek().text() + "'");
        }
        pos++;
    }

    private ExprException error(String msg) {
        return new ExprException(msg + " at " + peek().pos() + " in: " + src);
    }

    private Node ternary() {
        Node cond = binary(0);
        if (peek().isPunct("?")) {
            pos++;
            Node a = ternary();
            expectPunct(":");
            Node b = ternary();
            return new Node.Conditional(cond, a, b);
        }
        return cond;
    }

    /** The binary operator at the current position, or null. "not in" spans two tokens. */
    private String peekBinary() {
        Token t = peek();
        if (t.isWord("not") && peekAt(1).isWord("in")) {
            return "not in";
        }
        if ((t.kind() == Token.Kind.PUNCT || t.kind() == Token.Kind.IDENT) && BINARY.containsKey(t.text())) {
            return t.text();
        }
        return null;
    }

    private Node binary(int minPrec) {
        Node left = unary();
        while (true) {
            String op = peekBinary();
            if (op == null || BINARY.get(op) < minPrec) {
                return left;
            }
            pos += op.equals("not in") ? 2 : 1;
            int prec = BINARY.get(op);
            boolean rightAssoc = op.equals("**") || op.equals("^");
            Node right = binary(rightAssoc ? prec : prec + 1);
            left = new Node.Binary(op, left, right);
        }
    }

    private Node unary() {
        Token t = peek();
        if (t.isPunct("!") || t.isWord("not")) {
            pos++;
            return new Node.Unary(t.text(), binary(50));
        }
        if (t.isPunct("-") || t.isPunct("+")) {
            pos++;
            return new Node.Unary(t.text(), binary(90));
        }
        return postfix(primary());
    }

    private Node primary() {
        Token t = advance();
        switch (t.kind()) {
            case INT:
                try {
                    return new Node.Literal(Long.parseLong(t.text()));
                } catch (NumberFormatException e) {
                    pos--;
                    throw error("integer out of range");
                }
            case FLOAT:
                return new Node.Literal(Double.parseDouble(t.text()));
            case STRING:
                return new Node.Literal(t.text());
            case IDENT:
                return identifier(t);
            case PUNCT:
                return punctPrimary(t);
            default:
                pos--;
                throw error("unexpected end of expression");
        }
    }

    private Node identifier(Token t) {
        switch (t.text()) {
            case "true":
                return new Node.Literal(Boolean.TRUE);
            case "false":
                return new Node.Literal(Boolean.FALSE);
            case "nil":
                return new Node.Literal(null);
            default:
                break;
        }
        if (peek().isPunct("(")) {
            return call(t);
        }
        if (!fields.contains(t.text())) {
            pos--;
            throw error("unknown name " + t.text());
        }
        return new Node.Ident(t.text());
    }

    private Node call(Token name) {
        String fn = name.text();
        int[] arity = ARITY.get(fn);
        if (arity == null) {
            pos--;
            throw error("unknown function " + fn);
        }
        expectPunct("(");
        List<Node> args = new ArrayList<>();
        while (!peek().isPunct(")")) {
            boolean predicate = args.size() == 1 && PREDICATE_FUNCS.contains(fn);
            if (predicate) {
                predicateDepth++;
            }
            args.add(ternary());
            if (predicate) {
                predicateDepth--;
            }
            if (!peek().isPunct(",")) {
                break;
            }
            pos++;
        }
        expectPunct(")");
        if (args.size() < arity[0] || (arity[1] >= 0 && args.size() > arity[1])) {
            throw new ExprException(fn + " called with " + args.size() + " arguments in: " + src);
        }
        return new Node.Call(fn, args);
    }

    private Node punctPrimary(Token t) {
        switch (t.text()) {
            case "(": {
                Node n = ternary();
                expectPunct(")");
                return n;
            }
            case "[": {
                List<Node> items = new ArrayList<>();
                while (!peek().isPunct("]")) {
                    items.add(ternary());
                    if (!peek().isPunct(",")) {
                        break;
                    }
                    pos++;
                }
                expectPunct("]");
                return new Node.ArrayLit(items);
            }
            case "#":
                requirePredicate("#");
                return new Node.Pointer();
            case ".": {
                // ".price" inside a predicate is short for "#.price".
                requirePredicate(".field");
                Token f = advance();
                if (f.kind() != Token.Kind.IDENT) {
                    pos--;
                    throw error("expected a field name after '.'");
                }
                return new Node.Member(new Node.Pointer(), f.text(), false);
            }
            default:
                pos--;
                throw error("unexpected '" + t.text() + "'");
        }
    }

    private void requirePredicate(String what) {
        if (predicateDepth == 0) {
            pos--;
            throw error(what + " is only allowed in a predicate (map, filter, count, ...)");
        }
    }

    private Node postfix(Node n) {
        while (true) {
            Token t = peek();
            if (t.isPunct(".") || t.isPunct("?.")) {
                pos++;
                Token f = advance();
                if (f.kind() != Token.Kind.IDENT) {
                    pos--;
                    throw error("expected a field name after '" + t.text() + "'");
                }
                n = new Node.Member(n, f.text(), t.isPunct("?."));
            } else if (t.isPunct("[")) {
                pos++;
                Node idx = ternary();
                expectPunct("]");
                n = new Node.Index(n, idx);
            } else {
                return n;
            }
        }
    }
}
