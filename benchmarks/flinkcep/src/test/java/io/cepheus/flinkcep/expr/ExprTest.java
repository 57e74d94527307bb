package io.cepheus.flinkcep.expr;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.cepheus.flinkcep.event.Event;
import io.cepheus.flinkcep.event.SubEvent;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

class ExprTest {
    private static final Event EV = new Event(1, 42, "start", 1.5, 10L);
    private static final SubEvent SUB = new SubEvent(2, 42, "foo1", 2.0, 11L, 10.0);
    private static final Event NO_TS = new Event(3, 7, "x", 3.0, null);

    /** ctx("middle") holds two events, ctx("a") one; any other stage is empty. */
    private static final CtxLookup CTX = stage -> Map.<String, List<Event>>of(
            "middle", List.of(new SubEvent(10, 1, "foo", 1.0, 1L, 6.0), new SubEvent(11, 1, "foo", 2.5, 2L, 7.0)),
            "a", List.of(new Event(12, 1, "a", 1.5, 3L))).getOrDefault(stage, List.of());

    private static Object eval(String src, Event e) {
        return Expr.compile(src).eval(e, CTX);
    }

    private static boolean test(String src, Event e) {
        return Expr.compile(src).test(e, CTX);
    }

    @Test
    void literals() {
        assertEquals(3L, eval("3", EV));
        assertEquals(3.25, eval("3.25", EV));
        assertEquals(1e3, eval("1e3", EV));
        assertEquals("a\"b", eval("\"a\\\"b\"", EV));
        assertEquals("sq", eval("'sq'", EV));
        assertEquals(true, eval("true", EV));
        assertEquals(null, eval("nil", EV));
        assertEquals(List.of(1L, "x", 2.5), eval("[1, \"x\", 2.5]", EV));
    }

    @Test
    void fields() {
        assertEquals(42L, eval("id", EV));
        assertEquals("start", eval("name", EV));
        assertEquals(1.5, eval("price", EV));
        assertEquals(10L, eval("ts", EV));
        assertEquals("Event", eval("type", EV));
        assertEquals(null, eval("volume", EV));
        assertEquals("SubEvent", eval("type", SUB));
        assertEquals(10.0, eval("volume", SUB));
        assertEquals(null, eval("ts", NO_TS));
    }

    @Test
    void comparisonsMixIntAndFloat() {
        assertTrue(test("price == 1.5", EV));
        assertTrue(test("id == 42.0", EV));
        assertTrue(test("price > 1", EV));
        assertTrue(test("price >= 1.5 && price <= 1.5", EV));
        assertTrue(test("price < 2 and id != 41", EV));
        assertTrue(test("name == \"start\"", EV));
        assertFalse(test("name != \"start\"", EV));
        assertTrue(test("name < \"t\"", EV));
    }

    @Test
    void nilEquality() {
        assertTrue(test("volume == nil", EV));
        assertFalse(test("volume == 5.0", EV));
        assertTrue(test("ts == nil", NO_TS));
    }

    @Test
    void nilOrderingIsAnError() {
        assertThrows(EvalException.class, () -> test("volume > 5.0", EV));
    }

    @Test
    void shortCircuitGuardsNil() {
        assertFalse(test("type == \"SubEvent\" && volume > 5.0", EV));
        assertTrue(test("type == \"SubEvent\" && volume > 5.0", SUB));
        assertTrue(test("type == \"Event\" || volume > 5.0", EV));
    }

    @Test
    void arithmetic() {
        assertEquals(7L, eval("1 + 2 * 3", EV));
        assertEquals(9L, eval("(1 + 2) * 3", EV));
        assertEquals(2.5, eval("5 / 2", EV));
        assertEquals(1L, eval("7 % 3", EV));
        assertEquals(-1L, eval("2 - 3", EV));
        assertEquals(3.0, eval("price * 2", EV));
        assertEquals(-1.5, eval("-price", EV));
        assertEquals(512.0, eval("2 ** 3 ** 2", EV)); // right-associative
        assertEquals("ab", eval("\"a\" + \"b\"", EV));
        assertThrows(EvalException.class, () -> eval("name + 1", EV));
    }

    @Test
    void logicAndPrecedence() {
        assertTrue(test("!false", EV));
        assertTrue(test("not (price > 2)", EV));
        assertTrue(test("true || false && false", EV)); // && binds tighter
        assertFalse(test("(true || false) && false", EV));
        assertTrue(test("1 + 1 == 2", EV));
        assertThrows(EvalException.class, () -> test("1 && true", EV));
        assertThrows(EvalException.class, () -> test("price", EV)); // not a bool
    }

    @Test
    void stringOperators() {
        assertTrue(test("name startsWith \"st\"", EV));
        assertTrue(test("name endsWith \"rt\"", EV));
        assertTrue(test("name contains \"tar\"", EV));
        assertFalse(test("name contains \"b\"", EV));
        assertTrue(test("name matches \"^s.a\"", EV));
        assertTrue(test("type == \"SubEvent\" && name startsWith \"foo\"", SUB));
    }

    @Test
    void membership() {
        assertTrue(test("name in [\"a\", \"start\"]", EV));
        assertTrue(test("id in [1, 42]", EV));
        assertTrue(test("price in [1.5]", EV));
        assertTrue(test("name not in [\"a\"]", EV));
        assertFalse(test("id in []", EV));
    }

    @Test
    void ctxAndListFunctions() {
        assertEquals(2L, eval("len(ctx(\"middle\"))", EV));
        assertEquals(0L, eval("len(ctx(\"none\"))", EV));
        assertEquals(3.5, eval("sum(map(ctx(\"middle\"), .price))", EV));
        assertEquals(0L, eval("sum(map(ctx(\"none\"), .price))", EV));
        assertTrue(test("sum(map(ctx(\"middle\"), .price)) + price <= 5.0", EV));
        assertFalse(test("sum(map(ctx(\"middle\"), .price)) + price <= 5.0", SUB));
        assertTrue(test("ctx(\"a\")[0].price == price", EV));
        assertEquals(2.5, eval("ctx(\"middle\")[-1].price", EV));
        assertEquals(1L, eval("count(ctx(\"middle\"), .price > 2)", EV));
        assertTrue(test("all(ctx(\"middle\"), .volume > 5)", EV));
        assertTrue(test("any(ctx(\"middle\"), #.price == 1.0)", EV));
        assertTrue(test("none(ctx(\"middle\"), .price > 100)", EV));
        assertTrue(test("one(ctx(\"middle\"), .price > 2)", EV));
        assertEquals(1L, eval("len(filter(ctx(\"middle\"), .price > 2))", EV));
        assertEquals(3.5, eval("sum(ctx(\"middle\"), .price)", EV));
        assertEquals(2L, eval("count([true, false, true])", EV));
        assertEquals(6L, eval("sum([1, 2, 3])", EV));
        assertEquals(6.5, eval("sum([1, 2, 3.5])", EV));
        assertEquals("foo", eval("first(ctx(\"middle\")).name", EV));
        assertEquals(null, eval("last(ctx(\"none\"))", EV));
        assertEquals(5L, eval("len(name)", EV));
        assertEquals(List.of(1.0, 2.5), eval("map(ctx(\"middle\"), .price)", EV));
        assertEquals(2.0, eval("max(map(ctx(\"middle\"), .price)) - 0.5", EV));
        assertEquals(1L, eval("min(3, 1, 2)", EV));
        assertEquals(2.0, eval("mean([1, 3])", EV));
        assertEquals(2.0, eval("avg([1, 3])", EV));
        assertEquals(1.75, eval("avg(map(ctx(\"middle\"), .price))", EV));
        assertEquals(2L, eval("abs(-2)", EV));
        assertEquals("START", eval("upper(name)", EV));
    }

    @Test
    void predicateOuterScope() {
        // Inside a predicate a bare name is still the event under test, .x the element.
        assertEquals(2L, eval("count(ctx(\"middle\"), .price < price + 1.5)", EV));
    }

    @Test
    void indexErrors() {
        assertThrows(EvalException.class, () -> eval("ctx(\"none\")[0].price", EV));
        assertThrows(EvalException.class, () -> eval("ctx(\"a\")[1]", EV));
    }

    @Test
    void ternaryAndCoalesce() {
        assertEquals("big", eval("price > 1 ? \"big\" : \"small\"", EV));
        assertEquals(0.0, eval("volume ?? 0.0", EV));
        assertEquals(10.0, eval("volume ?? 0.0", SUB));
    }

    @Test
    void usesCtx() {
        assertTrue(Expr.compile("len(ctx(\"d\")) == 3").usesCtx());
        assertFalse(Expr.compile("name == \"a\"").usesCtx());
    }

    @Test
    void compileErrors() {
        assertThrows(ExprException.class, () -> Expr.compile("nosuchfield == 1"));
        assertThrows(ExprException.class, () -> Expr.compile("nosuchfn(1)"));
        assertThrows(ExprException.class, () -> Expr.compile("price >"));
        assertThrows(ExprException.class, () -> Expr.compile("(price > 1"));
        assertThrows(ExprException.class, () -> Expr.compile("\"open"));
        assertThrows(ExprException.class, () -> Expr.compile(".price > 1")); // outside a predicate
        assertThrows(ExprException.class, () -> Expr.compile("len(1, 2)"));
        assertThrows(ExprException.class, () -> Expr.compile("price > 1 price"));
        assertThrows(ExprException.class, () -> Expr.compile(""));
    }
}
