package io.cepheus.flinkcep.model;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.List;

/**
 * Reads cases from the conformance JSON tree. Only whitelisted fields are read (see
 * {@link CaseSpec}); a malformed field throws {@link IllegalArgumentException}.
 */
public final class CaseParser {
    private CaseParser() {}

    public static CaseSpec parseCase(JsonNode c) {
        String id = text(c, "id");
        // A case with several rules (an extension for generated cases) has "rules" and no
        // "pattern"; each rule runs in its own CepOperator over the same input.
        List<PatternSpec> rules = null;
        PatternSpec pattern = null;
        if (c.hasNonNull("rules") && !c.get("rules").isEmpty()) {
            rules = new ArrayList<>();
            for (JsonNode r : c.get("rules")) {
                rules.add(pattern(r, c));
            }
        } else {
            pattern = pattern(c.path("pattern"), c);
        }
        List<EventSpec> events = new ArrayList<>();
        for (JsonNode e : c.path("events")) {
            events.add(new EventSpec(
                    e.path("seq").asInt(),
                    e.path("id").asInt(),
                    optText(e, "name"),
                    e.path("price").asDouble(),
                    optLong(e, "ts"),
                    e.hasNonNull("type") ? e.get("type").asText() : "Event",
                    e.hasNonNull("volume") ? e.get("volume").asDouble() : null));
        }
        List<Step> steps = null;
        if (c.hasNonNull("operator_steps")) {
            steps = new ArrayList<>();
            for (JsonNode s : c.get("operator_steps")) {
                steps.add(new Step(
                        s.hasNonNull("event") ? s.get("event").asInt() : null,
                        optLong(s, "watermark"),
                        optLong(s, "processing_time"),
                        s.path("snapshot_restore").asBoolean(false)));
            }
        }
        return new CaseSpec(
                id,
                text(c, "driver"),
                pattern,
                events,
                c.path("timeout_handling").asBoolean(false),
                optText(c, "time_characteristic"),
                optText(c, "key_by"),
                c.hasNonNull("event_comparator") ? c.get("event_comparator") : null,
                steps,
                rules,
                c.path("wake_every_key").asBoolean(false));
    }

    private static PatternSpec pattern(JsonNode p, JsonNode c) {
        return new PatternSpec(
                stages(p.path("stages")),
                optLong(p, "within_ms"),
                optText(p, "within_type"),
                optText(p, "skip"),
                // The flag is given inside the pattern and, in the transcribed cases, also at top level.
                p.path("skip_throw_on_miss").asBoolean(false) || c.path("skip_throw_on_miss").asBoolean(false));
    }

    private static List<StageSpec> stages(JsonNode arr) {
        if (!arr.isArray() || arr.isEmpty()) {
            throw new IllegalArgumentException("pattern.stages must be a non-empty array");
        }
        List<StageSpec> out = new ArrayList<>();
        for (JsonNode s : arr) {
            List<StageSpec> group = s.hasNonNull("group") ? stages(s.get("group").path("stages")) : null;
            out.add(new StageSpec(
                    text(s, "name"),
                    text(s, "contiguity"),
                    optText(s, "condition"),
                    chain(s.path("chain")),
                    quantifier(s.get("quantifier")),
                    optText(s, "until"),
                    optLong(s, "within_ms"),
                    optText(s, "within_type"),
                    group));
        }
        return out;
    }

    /** The chained conditions of a stage: {"op": "where" | "or", "expr": ...} in order. */
    private static List<ChainedCondition> chain(JsonNode arr) {
        List<ChainedCondition> out = new ArrayList<>();
        if (arr.isMissingNode() || arr.isNull()) {
            return out;
        }
        if (!arr.isArray()) {
            throw new IllegalArgumentException("chain must be an array");
        }
        for (JsonNode c : arr) {
            String op = text(c, "op");
            if (!op.equals("where") && !op.equals("or")) {
                throw new IllegalArgumentException("chain op must be where or or, not " + op);
            }
            out.add(new ChainedCondition(op, text(c, "expr")));
        }
        return out;
    }

    private static QuantifierSpec quantifier(JsonNode q) {
        if (q == null || q.isNull()) {
            return QuantifierSpec.ONE;
        }
        return new QuantifierSpec(
                q.hasNonNull("kind") ? q.get("kind").asText() : "one",
                q.path("min").asInt(1),
                q.hasNonNull("max") ? q.get("max").asInt() : null,
                q.path("optional").asBoolean(false),
                q.path("greedy").asBoolean(false),
                q.hasNonNull("inner") ? q.get("inner").asText() : "relaxed",
                optLong(q, "window_ms"));
    }

    private static String text(JsonNode n, String field) {
        JsonNode v = n.get(field);
        if (v == null || !v.isTextual()) {
            throw new IllegalArgumentException("missing or non-string field: " + field);
        }
        return v.asText();
    }

    private static String optText(JsonNode n, String field) {
        JsonNode v = n.get(field);
        return v == null || v.isNull() ? null : v.asText();
    }

    private static Long optLong(JsonNode n, String field) {
        JsonNode v = n.get(field);
        if (v == null || v.isNull()) {
            return null;
        }
        if (!v.canConvertToLong()) {
            throw new IllegalArgumentException("field " + field + " is not an integer: " + v);
        }
        return v.asLong();
    }
}
