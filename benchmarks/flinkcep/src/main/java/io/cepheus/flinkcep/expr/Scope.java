package io.cepheus.flinkcep.expr;

/**
 * What an evaluation can see: the event under test, the {@code ctx} lookup (null for simple
 * conditions) and, inside a predicate such as {@code map(list, .price)}, the current element
 * ({@code #}).
 */
final class Scope {
    final Record env;
    final CtxLookup ctx;
    final Object pointer;
    final boolean hasPointer;

    private Scope(Record env, CtxLookup ctx, Object pointer, boolean hasPointer) {
        this.env = env;
        this.ctx = ctx;
        this.pointer = pointer;
        this.hasPointer = hasPointer;
    }

    static Scope of(Record env, CtxLookup ctx) {
        return new Scope(env, ctx, null, false);
    }

    Scope withPointer(Object element) {
        return new Scope(env, ctx, element, true);
    }
}
