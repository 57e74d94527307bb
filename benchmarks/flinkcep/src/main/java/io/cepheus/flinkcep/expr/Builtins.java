package io.cepheus.flinkcep.expr;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * The builtin functions. Predicate arguments ({@code map(xs, .price)}, {@code count(xs, # > 1)})
 * are evaluated once per element, with {@code #} bound to the element.
 */
final class Builtins {
    private Builtins() {}

    static final Set<String> NAMES = Set.of(
            "ctx", "len", "sum", "count", "all", "any", "none", "one", "filter", "map", "first",
            "last", "abs", "min", "max", "mean", "avg", "lower", "upper");

    static Object call(String name, List<Node> args, Scope s) {
        switch (name) {
            case "ctx":
                return ctx(args, s);
            case "len":
                return len(arg1(name, args).eval(s));
            case "sum":
                return sum(elements(name, args, s, 1, 2));
            case "count": {
                List<?> xs = Values.list(first(name, args, 2).eval(s), name);
                long n = 0;
                for (Object x : xs) {
                    // Without a predicate expr-lang counts the elements that are true.
                    Object v = args.size() == 2 ? args.get(1).eval(s.withPointer(x)) : x;
                    if (Values.bool(v, name)) {
                        n++;
                    }
                }
                return n;
            }
            case "all":
            case "any":
            case "none":
            case "one":
                return quantify(name, args, s);
            case "filter": {
                checkArity(name, args, 2, 2);
                List<Object> out = new ArrayList<>();
                for (Object x : Values.list(args.get(0).eval(s), name)) {
                    if (Values.bool(args.get(1).eval(s.withPointer(x)), name)) {
                        out.add(x);
                    }
                }
                return out;
            }
            case "map":
                checkArity(name, args, 2, 2);
                return elements(name, args, s, 2, 2);
            case "first":
            case "last": {
                List<?> xs = Values.list(arg1(name, args).eval(s), name);
                if (xs.isEmpty()) {
                    return null;
                }
                return name.equals("first") ? xs.get(0) : xs.get(xs.size() - 1);
            }
            case "abs": {
                Number n = Values.number(arg1(name, args).eval(s), name);
                return n instanceof Long l ? (Object) Math.abs(l) : (Object) Math.abs(n.doubleValue());
            }
            case "min":
            case "max":
                return minMax(name, spread(name, args, s));
            case "mean":
            case "avg": {
                List<?> xs = spread(name, args, s);
                if (xs.isEmpty()) {
                    return 0.0;
                }
                return ((Number) Values.number(sum(xs), name)).doubleValue() / xs.size();
            }
            case "lower":
                return Values.string(arg1(name, args).eval(s), name).toLowerCase(Locale.ROOT);
            case "upper":
                return Values.string(arg1(name, args).eval(s), name).toUpperCase(Locale.ROOT);
            default:
                throw new EvalException("unknown function " + name);
        }
    }

    private static Object ctx(List<Node> args, Scope s) {
        Object stage = arg1("ctx", args).eval(s);
        if (!(stage instanceof String st)) {
            throw new EvalException("ctx needs a stage name, got " + Values.describe(stage));
        }
        if (s.ctx == null) {
            throw new EvalException("ctx(\"" + st + "\") used in a condition without context");
        }
        try {
            return new ArrayList<Object>(s.ctx.eventsOf(st));
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new EvalException("ctx(\"" + st + "\") failed: " + e);
        }
    }

    private static Object len(Object x) {
        if (x instanceof List<?> l) {
            return (long) l.size();
        }
        if (x instanceof String str) {
            return (long) str.codePointCount(0, str.length());
        }
        throw new EvalException("invalid argument for len: " + Values.describe(x));
    }

    /** The list argument, mapped through the optional predicate (argument 2). */
    private static List<Object> elements(String name, List<Node> args, Scope s, int min, int max) {
        checkArity(name, args, min, max);
        List<?> xs = Values.list(args.get(0).eval(s), name);
        List<Object> out = new ArrayList<>(xs.size());
        for (Object x : xs) {
            out.add(args.size() == 2 ? args.get(1).eval(s.withPointer(x)) : x);
        }
        return out;
    }

    /** Sum of numbers: an int while every element is an int, a float otherwise; 0 when empty. */
    static Object sum(List<?> xs) {
        boolean allInt = true;
        long li = 0;
        double d = 0;
        for (Object x : xs) {
            Number n = Values.number(x, "sum");
            if (n instanceof Long l) {
                li += l;
            } else {
                allInt = false;
            }
            d += n.doubleValue();
        }
        return allInt ? (Object) li : (Object) d;
    }

    private static Object quantify(String name, List<Node> args, Scope s) {
        checkArity(name, args, 2, 2);
        long hits = 0;
        List<?> xs = Values.list(args.get(0).eval(s), name);
        for (Object x : xs) {
            if (Values.bool(args.get(1).eval(s.withPointer(x)), name)) {
                hits++;
            }
        }
        return switch (name) {
            case "all" -> hits == xs.size();
            case "any" -> hits > 0;
            case "none" -> hits == 0;
            default -> hits == 1;
        };
    }

    /** min/max/mean take either one array or several numbers. */
    private static List<?> spread(String name, List<Node> args, Scope s) {
        if (args.isEmpty()) {
            throw new EvalException(name + " needs arguments");
        }
        if (args.size() == 1) {
            Object x = args.get(0).eval(s);
            if (x instanceof List<?> l) {
                return l;
            }
            return List.of(x);
        }
        List<Object> out = new ArrayList<>();
        for (Node n : args) {
            out.add(n.eval(s));
        }
        return out;
    }

    private static Object minMax(String name, List<?> xs) {
        if (xs.isEmpty()) {
            throw new EvalException(name + " of an empty array");
        }
        Object best = xs.get(0);
        Values.number(best, name);
        for (Object x : xs) {
            int c = Values.compare(name, Values.number(x, name), best);
            if (name.equals("min") ? c < 0 : c > 0) {
                best = x;
            }
        }
        return best;
    }

    private static Node arg1(String name, List<Node> args) {
        checkArity(name, args, 1, 1);
        return args.get(0);
    }

    private static Node first(String name, List<Node> args, int max) {
        checkArity(name, args, 1, max);
        return args.get(0);
    }

    private static void checkArity(String name, List<Node> args, int min, int max) {
        if (args.size() < min || args.size() > max) {
            throw new EvalException(name + " takes " + (min == max ? "" + min : min + " to " + max)
                    + " arguments, got " + args.size());
        }
    }
}
