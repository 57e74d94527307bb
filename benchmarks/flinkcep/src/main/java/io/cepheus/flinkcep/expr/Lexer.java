package io.cepheus.flinkcep.expr;

import java.util.ArrayList;
import java.util.List;

/** Splits expr-lang source into tokens (the subset the conformance cases use, and a bit more). */
final class Lexer {
    /** Longest first, so that "==" wins over "=" and "?." over "?". */
    private static final String[] PUNCT = {
        "?.", "??", "==", "!=", "<=", ">=", "&&", "||", "**", "(", ")", "[", "]", ",", ".", "?",
        ":", "#", "<", ">", "+", "-", "*", "/", "%", "^", "!"
    };

    private final String src;
    private int pos;

    private Lexer(String src) {
        this.src = src;
    }

    static List<Token> tokenize(String src) {
        Lexer lx = new Lexer(src);
        List<Token> out = new ArrayList<>();
        Token t;
        do {
            t = lx.next();
            out.add(t);
        } while (t.kind() != Token.Kind.EOF);
        return out;
    }

    private Token next() {
        while (pos < src.length() && Character.isWhitespace(src.charAt(pos))) {
            pos++;
        }
        if (pos >= src.length()) {
            return new Token(Token.Kind.EOF, "", pos);
        }
        int start = pos;
        char c = src.charAt(pos);
        if (Character.isDigit(c)) {
            return number(start);
        }
        if (c == '"' || c == '\'') {
            return string(start, c);
        }
        if (Character.isLetter(c) || c == '_' || c == '$') {
            while (pos < src.length()
                    && (Character.isLetterOrDigit(src.charAt(pos)) || src.charAt(pos) == '_' || src.charAt(pos) == '$')) {
                pos++;
            }
            return new Token(Token.Kind.IDENT, src.substring(start, pos), start);
        }
        for (String p : PUNCT) {
            if (src.startsWith(p, pos)) {
                pos += p.length();
                return new Token(Token.Kind.PUNCT, p, start);
            }
        }
        throw new ExprException("unexpected character '" + c + "' at " + pos + " in: " + src);
    }

    private Token number(int start) {
        boolean isFloat = false;
        while (pos < src.length() && (Character.isDigit(src.charAt(pos)) || src.charAt(pos) == '_')) {
            pos++;
        }
        // A '.' followed by a digit continues the number; "1..5" or "a[1].x" must not.
        if (pos + 1 < src.length() && src.charAt(pos) == '.' && Character.isDigit(src.charAt(pos + 1))) {
            isFloat = true;
            pos++;
            while (pos < src.length() && Character.isDigit(src.charAt(pos))) {
                pos++;
            }
        }
        if (pos < src.length() && (src.charAt(pos) == 'e' || src.charAt(pos) == 'E')) {
            int save = pos;
            pos++;
            if (pos < src.length() && (src.charAt(pos) == '+' || src.charAt(pos) == '-')) {
                pos++;
            }
            if (pos < src.length() && Character.isDigit(src.charAt(pos))) {
                isFloat = true;
                while (pos < src.length() && Character.isDigit(src.charAt(pos))) {
                    pos++;
                }
            } else {
                pos = save;
            }
        }
        String text = src.substring(start, pos).replace("_", "");
        return new Token(isFloat ? Token.Kind.FLOAT : Token.Kind.INT, text, start);
    }

    private Token string(int start, char quote) {
        pos++; // opening quote
        StringBuilder sb = new StringBuilder();
        while (pos < src.length()) {
            char c = src.charAt(pos++);
            if (c == quote) {
                return new Token(Token.Kind.STRING, sb.toString(), start);
            }
            if (c == '\\' && pos < src.length()) {
                char e = src.charAt(pos++);
                switch (e) {
                    case 'n' -> sb.append('\n');
                    case 't' -> sb.append('\t');
                    case 'r' -> sb.append('\r');
                    case '\\', '"', '\'' -> sb.append(e);
                    case 'u' -> {
                        if (pos + 4 > src.length()) {
                            throw new ExprException("bad \\u escape in: " + src);
                        }
                        sb.append((char) Integer.parseInt(src.substring(pos, pos + 4), 16));
                        pos += 4;
                    }
                    default -> throw new ExprException("unknown escape \\" + e + " in: " + src);
                }
            } else {
                sb.append(c);
            }
        }
        throw new ExprException("unterminated string at " + start + " in: " + src);
    }
}
