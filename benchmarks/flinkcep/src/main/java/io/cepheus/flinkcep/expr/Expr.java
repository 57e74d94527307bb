package io.cepheus.flinkcep.expr;

import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A compiled condition in the expr-lang subset the conformance cases use (see the package's
 * tests for the exact coverage).
 *
 * <p>Run-time errors (nil or wrongly typed operands, index out of range, a non-bool result) throw
 * {@link EvalException}; callers decide what an error means (the Flink conditions count it and
 * treat it as false, as Cepheus's Go engine does).
 */
public final class Expr {
    /** The event fields conditions may name. */
    public static final Set<String> EVENT_FIELDS = Set.of("id", "name", "price", "ts", "type", "volume");

    private final String source;
    private final Node root;
    private final boolean usesCtx;

    private Expr(String source, Node root) {
        this.source = source;
        this.root = root;
        AtomicBoolean ctx = new AtomicBoolean();
        root.walk(n -> {
            if (n instanceof Node.Call c && c.name().equals("ctx")) {
                ctx.set(true);
            }
        });
        this.usesCtx = ctx.get();
    }

    /** Parses {@code source} over the event fields. @throws ExprException if it does not parse */
    public static Expr compile(String source) {
        return compile(source, EVENT_FIELDS);
    }

    public static Expr compile(String source, Set<String> fields) {
        if (source == null || source.isBlank()) {
            throw new ExprException("empty expression");
        }
        return new Expr(source, Parser.parse(source, fields));
    }

    public String source() {
        return source;
    }

    /** Whether the expression calls {@code ctx(...)}, i.e. needs an IterativeCondition. */
    public boolean usesCtx() {
        return usesCtx;
    }

    /** Evaluates to any value. {@code ctx} may be null when {@link #usesCtx()} is false. */
    public Object eval(Record env, CtxLookup ctx) {
        return root.eval(Scope.of(env, ctx));
    }

    /** Evaluates a condition. @throws EvalException on a run-time error or a non-bool result */
    public boolean test(Record env, CtxLookup ctx) {
        Object v = eval(env, ctx);
        if (v instanceof Boolean b) {
            return b;
        }
        throw new EvalException("condition " + source + " gave " + Values.describe(v) + ", not a bool");
    }

    @Override
    public String toString() {
        return source;
    }
}
