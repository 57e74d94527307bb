package io.cepheus.flinkcep.expr;

/** An expression that does not parse, or that names something unknown. */
public class ExprException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public ExprException(String message) {
        super(message);
    }
}
