package io.cepheus.flinkcep;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.cepheus.flinkcep.model.CaseParser;
import io.cepheus.flinkcep.model.CaseSpec;
import io.cepheus.flinkcep.results.CaseResult;
import io.cepheus.flinkcep.results.ResultsWriter;

import java.io.File;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Command line: {@code cases --dir <dir|file.json> --out <results.json> [--case <id>]
 * [--timeout-ms <n>]}.
 *
 * <p>Reads every {@code *.json} case file in the directory (sorted by name), runs each case
 * through real Flink CEP and writes the results file (cepheus-conformance-results/v1). Logs go to
 * stderr. Exit status: 0 when the results file was written (cases may still carry errors), 2 on
 * bad usage, 1 when the input could not be read.
 *
 * <p>{@code bench --workload <name> --data <file.csv> --warmup <n> --out-of-orderness-ms <ms>
 * [--timeout-s <s>]} runs one benchmark workload as a Flink job instead ({@link
 * io.cepheus.flinkcep.bench.BenchJob}; make bench-compare).
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) {
        System.exit(run(args));
    }

    static int run(String[] args) {
        if (args.length > 0 && args[0].equals("bench")) {
            try {
                return io.cepheus.flinkcep.bench.BenchJob.run(args);
            } catch (Exception e) {
                System.err.println("flinkcep bench: " + e);
                e.printStackTrace();
                return 1;
            }
        }
        if (args.length == 0 || !args[0].equals("cases")) {
            return usage("the commands are 'cases' and 'bench'");
        }
        String dir = null, out = null, only = null;
        long timeoutMs = 120_000;
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                return usage("missing value for " + a);
            }
            switch (a) {
                case "--dir" -> dir = args[++i];
                case "--out" -> out = args[++i];
                case "--case" -> only = args[++i];
                case "--timeout-ms" -> timeoutMs = Long.parseLong(args[++i]);
                default -> {
                    return usage("unknown argument " + a);
                }
            }
        }
        if (dir == null || out == null) {
            return usage("--dir and --out are required");
        }
        List<Loaded> cases;
        try {
            cases = load(new File(dir), only);
        } catch (Exception e) {
            System.err.println("flinkcep: cannot read cases: " + e);
            return 1;
        }
        long start = System.nanoTime();
        Map<String, CaseResult> results = new LinkedHashMap<>();
        int errors = 0;
        for (Loaded c : cases) {
            CaseResult r;
            if (c.spec() != null) {
                r = runWithTimeout(c.spec(), timeoutMs);
            } else {
                r = new CaseResult();
                r.error = "case could not be read: " + c.parseError();
            }
            if (r.error != null) {
                errors++;
                System.err.println("flinkcep: " + c.id() + ": error: " + r.error);
            }
            results.put(c.id(), r);
        }
        try {
            ResultsWriter.write(new File(out), results);
        } catch (Exception e) {
            System.err.println("flinkcep: cannot write " + out + ": " + e);
            return 1;
        }
        System.err.printf("flinkcep: %d cases, %d with error, %.1fs -> %s%n",
                results.size(), errors, (System.nanoTime() - start) / 1e9, out);
        return 0;
    }

    /** A case as read: its spec, or why it could not be read (it then still gets a result). */
    record Loaded(String id, CaseSpec spec, String parseError) {}

    /**
     * Loads the cases of one file, or of every *.json file in a directory. A file that is not
     * JSON fails the whole run; a malformed case only fails that case.
     */
    static List<Loaded> load(File dirOrFile, String only) throws Exception {
        File[] files;
        if (dirOrFile.isDirectory()) {
            files = dirOrFile.listFiles((d, name) -> name.endsWith(".json"));
            if (files == null) {
                throw new IllegalArgumentException("cannot list " + dirOrFile);
            }
            Arrays.sort(files);
        } else if (dirOrFile.isFile()) {
            files = new File[] {dirOrFile};
        } else {
            throw new IllegalArgumentException("no such directory: " + dirOrFile);
        }
        ObjectMapper mapper = new ObjectMapper();
        List<Loaded> out = new ArrayList<>();
        Map<String, File> seen = new LinkedHashMap<>();
        for (File f : files) {
            JsonNode root = mapper.readTree(f);
            int index = 0;
            for (JsonNode c : root.path("cases")) {
                index++;
                String id = c.path("id").isTextual() ? c.get("id").asText() : f.getName() + "#" + index;
                if (only != null && !id.equals(only)) {
                    continue;
                }
                if (seen.containsKey(id)) {
                    System.err.println("flinkcep: duplicate case id " + id + " in " + f
                            + " (first in " + seen.get(id) + "); keeping the first");
                    continue;
                }
                seen.put(id, f);
                try {
                    out.add(new Loaded(id, CaseParser.parseCase(c), null));
                } catch (RuntimeException e) {
                    out.add(new Loaded(id, null, e.toString()));
                }
            }
        }
        return out;
    }

    /**
     * Runs a case on a worker thread so that a runaway case (generated patterns can explode
     * combinatorially) is reported as an error instead of hanging the whole run.
     */
    @SuppressWarnings({"deprecation", "removal"})
    static CaseResult runWithTimeout(CaseSpec c, long timeoutMs) {
        AtomicReference<CaseResult> ref = new AtomicReference<>();
        CaseResult partial = new CaseResult();
        Thread t = new Thread(() -> ref.set(CaseRunner.run(c, partial)), "case-" + c.id());
        t.setDaemon(true);
        t.start();
        try {
            t.join(timeoutMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (t.isAlive()) {
            try {
                t.stop(); // best effort: Java 17 still honours it; the thread is a daemon anyway
            } catch (Throwable ignored) {
                // UnsupportedOperationException on newer JDKs
            }
            // What the case emitted before it was stopped is kept, with the step it was at
            // (Cepheus's results of a case that hangs in Flink are compared up to there).
            try {
                t.join(5_000); // let the stopped thread's own error handling finish first
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return timedOut(partial, "timeout: case still running after " + timeoutMs + " ms");
        }
        CaseResult r = ref.get();
        if (r == null) {
            r = new CaseResult();
            r.error = "case thread died without a result";
        }
        return r;
    }

    /**
     * Marks the result a timed-out case was filling as failed at the step it was at: the case's
     * own result, or for a case with several rules the result of the rule being run (the rules
     * not run yet have no result).
     */
    private static CaseResult timedOut(CaseResult partial, String error) {
        CaseResult r = partial;
        if (partial.rules != null && !partial.rules.isEmpty()) {
            r = partial.rules.get(partial.rules.size() - 1);
        }
        r.error = error;
        r.errorClass = CaseResult.ERROR_RUN;
        r.errorStep = r.currentStep >= 0 ? r.currentStep : null;
        return partial;
    }

    private static int usage(String why) {
        System.err.println("flinkcep: " + why);
        System.err.println("usage: java -jar flinkcep.jar cases --dir <dir|file.json> --out <results.json>"
                + " [--case <id>] [--timeout-ms <n>]");
        System.err.println("       java -jar flinkcep.jar bench --workload <name> --data <file.csv> --warmup <n>"
                + " --out-of-orderness-ms <ms> [--timeout-s <s>]");
        return 2;
    }
}
