package io.cepheus.flinkcep.expr;

/** One lexical token. {@code text} is the operator/identifier text, or the decoded string. */
record Token(Kind kind, String text, int pos) {
    enum Kind {
        INT,
        FLOAT,
        STRING,
        IDENT,
        /** Punctuation and symbolic operators: ( ) [ ] , . ?. ? : # == != ... */
        PUNCT,
        EOF
    }

    boolean is(Kind k, String t) {
        return kind == k && text.equals(t);
    }

    boolean isPunct(String t) {
        return is(Kind.PUNCT, t);
    }

    /** Word operators and keywords are lexed as identifiers. */
    boolean isWord(String t) {
        return is(Kind.IDENT, t);
    }
}
