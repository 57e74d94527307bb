package io.cepheus.flinkcep.results;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;

import java.io.File;
import java.io.IOException;
import java.util.List;
import java.util.Map;

/**
 * Writes the results file with a streaming generator, so every object's keys come out in the
 * order written: the format requires stage keys in pattern stage order.
 */
public final class ResultsWriter {
    public static final String FORMAT = "cepheus-conformance-results/v1";

    private ResultsWriter() {}

    public static void write(File out, Map<String, CaseResult> results) throws IOException {
        File parent = out.getAbsoluteFile().getParentFile();
        if (parent != null) {
            parent.mkdirs();
        }
        try (JsonGenerator g = new JsonFactory().createGenerator(out, JsonEncoding.UTF8)) {
            g.useDefaultPrettyPrinter();
            g.writeStartObject();
            g.writeStringField("format", FORMAT);
            g.writeObjectFieldStart("results");
            for (Map.Entry<String, CaseResult> e : results.entrySet()) {
                g.writeFieldName(e.getKey());
                writeCase(g, e.getValue());
            }
            g.writeEndObject();
            g.writeEndObject();
        }
    }

    private static void writeCase(JsonGenerator g, CaseResult r) throws IOException {
        g.writeStartObject();
        g.writeArrayFieldStart("matches");
        for (CaseResult.Match m : r.matches) {
            g.writeStartObject();
            g.writeStringField("via", m.via());
            g.writeFieldName("stages");
            writeStages(g, m.stages());
            g.writeNumberField("step", m.step());
            if (m.timestamp() != null) {
                g.writeNumberField("timestamp", m.timestamp());
            }
            if (m.wake() != null) {
                g.writeNumberField("wake", m.wake());
            }
            g.writeEndObject();
        }
        g.writeEndArray();
        g.writeArrayFieldStart("timeouts");
        for (CaseResult.Timeout t : r.timeouts) {
            g.writeStartObject();
            g.writeFieldName("stages");
            writeStages(g, t.stages());
            g.writeNumberField("timestamp", t.timestamp());
            g.writeNumberField("step", t.step());
            if (t.wake() != null) {
                g.writeNumberField("wake", t.wake());
            }
            g.writeEndObject();
        }
        g.writeEndArray();
        g.writeArrayFieldStart("output");
        for (CaseResult.OutputItem item : r.output) {
            g.writeStartObject();
            if (item.watermark() != null) {
                g.writeNumberField("watermark", item.watermark());
            } else {
                g.writeFieldName("match");
                writeInts(g, item.match());
            }
            g.writeEndObject();
        }
        g.writeEndArray();
        g.writeFieldName("late");
        writeInts(g, r.late);
        if (r.error == null) {
            g.writeNullField("error");
        } else {
            g.writeStringField("error", r.error);
            g.writeStringField("error_class", r.errorClass == null ? CaseResult.ERROR_RUN : r.errorClass);
            if (r.errorStep != null) {
                g.writeNumberField("error_step", r.errorStep);
            }
        }
        if (r.rules != null) {
            g.writeArrayFieldStart("rules");
            for (CaseResult sub : r.rules) {
                writeCase(g, sub);
            }
            g.writeEndArray();
        }
        g.writeEndObject();
    }

    private static void writeStages(JsonGenerator g, Map<String, List<Integer>> stages) throws IOException {
        g.writeStartObject();
        for (Map.Entry<String, List<Integer>> e : stages.entrySet()) {
            g.writeFieldName(e.getKey());
            writeInts(g, e.getValue());
        }
        g.writeEndObject();
    }

    private static void writeInts(JsonGenerator g, List<Integer> xs) throws IOException {
        g.writeStartArray();
        for (int x : xs) {
            g.writeNumber(x);
        }
        g.writeEndArray();
    }
}
