package io.cepheus.flinkcep.expr;

/**
 * A value with named fields, as an expression sees it: the event under test, or an element of a
 * {@code ctx("X")} list.
 */
public interface Record {
    /**
     * Returns the field's value as an expression value: Long, Double, String, Boolean or null.
     *
     * @throws IllegalArgumentException if the record has no such field
     */
    Object field(String name);
}
