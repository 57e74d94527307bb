package io.cepheus.flinkcep.expr;

import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * Value rules, following expr-lang (github.com/expr-lang/expr) as Cepheus compiles it: numbers
 * are Long (int) or Double (float) and mix freely; {@code /} always gives a float; {@code ==} with
 * nil is false unless both are nil; ordering, arithmetic and string operators on nil or on the
 * wrong types are run-time errors.
 */
final class Values {
    private Values() {}

    static boolean bool(Object x, String op) {
        if (x instanceof Boolean b) {
            return b;
        }
        throw new EvalException("operator " + op + " needs a bool, got " + describe(x));
    }

    static Number number(Object x, String op) {
        if (x instanceof Long || x instanceof Double) {
            return (Number) x;
        }
        if (x instanceof Integer i) {
            return (long) i;
        }
        throw new EvalException("operator " + op + " needs a number, got " + describe(x));
    }

    static String string(Object x, String op) {
        if (x instanceof String s) {
            return s;
        }
        throw new EvalException("operator " + op + " needs a string, got " + describe(x));
    }

    static boolean isNumber(Object x) {
        return x instanceof Long || x instanceof Double || x instanceof Integer;
    }

    static Object negate(Object x) {
        Number n = number(x, "-");
        return n instanceof Long l ? (Object) (-l) : (Object) (-n.doubleValue());
    }

    static boolean equal(Object a, Object b) {
        if (isNumber(a) && isNumber(b)) {
            Number x = number(a, "=="), y = number(b, "==");
            if (x instanceof Long && y instanceof Long) {
                return x.longValue() == y.longValue();
            }
            return x.doubleValue() == y.doubleValue();
        }
        if (a instanceof List<?> la && b instanceof List<?> lb) {
            if (la.size() != lb.size()) {
                return false;
            }
            for (int i = 0; i < la.size(); i++) {
                if (!equal(la.get(i), lb.get(i))) {
                    return false;
                }
            }
            return true;
        }
        if (a instanceof Record || b instanceof Record) {
            return a == b;
        }
        return Objects.equals(a, b);
    }

    static Object binary(String op, Object a, Object b) {
        switch (op) {
            case "==":
                return equal(a, b);
            case "!=":
                return !equal(a, b);
            case "<":
                return compare(op, a, b) < 0;
            case "<=":
                return compare(op, a, b) <= 0;
            case ">":
                return compare(op, a, b) > 0;
            case ">=":
                return compare(op, a, b) >= 0;
            case "+":
                if (a instanceof String sa && b instanceof String sb) {
                    return sa + sb;
                }
                return arith(op, a, b);
            case "-":
            case "*":
                return arith(op, a, b);
            case "/":
                return number(a, op).doubleValue() / number(b, op).doubleValue();
            case "%": {
                if (!(a instanceof Long) || !(b instanceof Long)) {
                    throw new EvalException("operator % needs ints, got " + describe(a) + " and " + describe(b));
                }
                if ((Long) b == 0) {
                    throw new EvalException("integer divide by zero");
                }
                return (Long) a % (Long) b;
            }
            case "**":
            case "^":
                return Math.pow(number(a, op).doubleValue(), number(b, op).doubleValue());
            case "in":
                return in(a, b);
            case "not in":
                return !in(a, b);
            case "contains":
                return string(a, op).contains(string(b, op));
            case "startsWith":
                return string(a, op).startsWith(string(b, op));
            case "endsWith":
                return string(a, op).endsWith(string(b, op));
            case "matches":
                return Pattern.compile(string(b, op)).matcher(string(a, op)).find();
            default:
                throw new EvalException("unknown operator " + op);
        }
    }

    private static Object arith(String op, Object a, Object b) {
        Number x = number(a, op), y = number(b, op);
        if (x instanceof Long && y instanceof Long) {
            long l = x.longValue(), r = y.longValue();
            return switch (op) {
                case "+" -> l + r;
                case "-" -> l - r;
                default -> l * r;
            };
        }
        double l = x.doubleValue(), r = y.doubleValue();
        return switch (op) {
            case "+" -> l + r;
            case "-" -> l - r;
            default -> l * r;
        };
    }

    static int compare(String op, Object a, Object b) {
        if (isNumber(a) && isNumber(b)) {
            Number x = number(a, op), y = number(b, op);
            if (x instanceof Long && y instanceof Long) {
                return Long.compare(x.longValue(), y.longValue());
            }
            return Double.compare(x.doubleValue(), y.doubleValue());
        }
        if (a instanceof String sa && b instanceof String sb) {
            return sa.compareTo(sb);
        }
        throw new EvalException("invalid operation: " + describe(a) + " " + op + " " + describe(b));
    }

    private static boolean in(Object needle, Object haystack) {
        if (haystack instanceof List<?> l) {
            for (Object o : l) {
                if (equal(needle, o)) {
                    return true;
                }
            }
            return false;
        }
        throw new EvalException("operator in needs an array, got " + describe(haystack));
    }

    static Object member(Object target, String name) {
        if (target instanceof Record r) {
            try {
                return r.field(name);
            } catch (IllegalArgumentException e) {
                throw new EvalException(e.getMessage());
            }
        }
        throw new EvalException("cannot fetch " + name + " from " + describe(target));
    }

    static Object index(Object target, Object idx) {
        if (target instanceof List<?> l) {
            if (!(idx instanceof Long)) {
                throw new EvalException("array index must be an int, got " + describe(idx));
            }
            long i = (Long) idx;
            if (i < 0) {
                i += l.size(); // expr-lang: negative indexes count from the end
            }
            if (i < 0 || i >= l.size()) {
                throw new EvalException("index out of range: " + idx + " (array of length " + l.size() + ")");
            }
            return l.get((int) i);
        }
        if (target instanceof Record && idx instanceof String f) {
            return member(target, f);
        }
        throw new EvalException("cannot index " + describe(target));
    }

    static List<?> list(Object x, String fn) {
        if (x instanceof List<?> l) {
            return l;
        }
        throw new EvalException(fn + " needs an array, got " + describe(x));
    }

    static String describe(Object x) {
        if (x == null) {
            return "nil";
        }
        if (x instanceof Long) {
            return "int(" + x + ")";
        }
        if (x instanceof Double) {
            return "float(" + x + ")";
        }
        if (x instanceof String) {
            return "string(\"" + x + "\")";
        }
        if (x instanceof Boolean) {
            return "bool(" + x + ")";
        }
        if (x instanceof List<?> l) {
            return "array(len " + l.size() + ")";
        }
        return x.getClass().getSimpleName();
    }
}
