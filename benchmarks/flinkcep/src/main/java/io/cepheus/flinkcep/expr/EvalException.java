package io.cepheus.flinkcep.expr;

/** A run-time error while evaluating an expression (wrong operand types, nil, bad index...). */
public class EvalException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public EvalException(String message) {
        super(message);
    }
}
