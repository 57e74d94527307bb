package io.cepheus.flinkcep.bench;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.cep.CEP;
import org.apache.flink.cep.PatternStream;
import org.apache.flink.cep.functions.PatternProcessFunction;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The Flink side of the benchmark comparison ({@code make bench-compare}; benchmarks/README.md):
 * one workload as a real Flink job in a local MiniCluster.
 *
 * <p>The job: a {@link NumberSequenceSource} of row indexes, mapped (chained) to the events read
 * into memory before the job starts; timestamps and watermarks from
 * {@code WatermarkStrategy.forBoundedOutOfOrderness} (Flink's default periodic emission, every 200
 * ms); {@code keyBy(customer)} for keyed workloads (an unkeyed one goes through
 * {@code CEP.pattern} on the plain stream, which keys it on one global key at parallelism 1);
 * {@code CEP.pattern(...).inEventTime()}; a {@link PatternProcessFunction} that counts the
 * matches and records their signatures; a discarding sink. Parallelism 1,
 * HashMapStateBackend, object reuse on, no checkpoints.
 *
 * <p>Timing is inside the process: the clock starts when the map hands over the first event
 * after the warm-up and stops when the process function closes, after the final watermark of the
 * bounded source has flushed everything. JVM start, reading the data and building the job are
 * not timed. The process, and so the timed span, is shared with Flink's own threads; pinned to
 * one core ({@code taskset -c 0}) they all compete for it, which CPU seconds shows.
 *
 * <p>Output: one JSON line on stdout with the fields of the Go side's {@code benchmarks.Result}.
 * A run that passes its time cap (counted from the first event) prints {@code "finished": false}
 * with the number of events the source had emitted by then, and the process halts.
 */
public final class BenchJob {
    private BenchJob() {}

    // The job runs in this JVM's MiniCluster, whose tasks see the same static fields (the job has
    // no jars of its own, so its classes come from the application class loader).
    static volatile BenchEvent[] data;
    static volatile int warmup;
    static volatile long firstNanos;
    static volatile long startNanos;
    static volatile long startCpu;
    static volatile long endNanos;
    static volatile long endCpu;
    static volatile long emitted;
    // What the CountMatches of each CEP operator left when it closed (one per rule), by rule.
    static final Object closeLock = new Object();
    static long matches;
    static long[][] sigs;
    static int[] sigLens;
    static long[] counts;
    static int closed;

    public static int run(String[] args) throws Exception {
        String workload = null, dataPath = null;
        int warm = -1;
        long oooMs = -1, timeoutS = 120;
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                return usage("missing value for " + a);
            }
            switch (a) {
                case "--workload" -> workload = args[++i];
                case "--data" -> dataPath = args[++i];
                case "--warmup" -> warm = Integer.parseInt(args[++i]);
                case "--out-of-orderness-ms" -> oooMs = Long.parseLong(args[++i]);
                case "--timeout-s" -> timeoutS = Long.parseLong(args[++i]);
                default -> {
                    return usage("unknown argument " + a);
                }
            }
        }
        if (workload == null || dataPath == null || warm < 0 || oooMs < 0) {
            return usage("--workload, --data, --warmup and --out-of-orderness-ms are required");
        }
        Workloads.Spec spec = Workloads.get(workload);
        BenchEvent[] events = BenchData.read(Path.of(dataPath));
        if (warm >= events.length) {
            return usage("warm-up " + warm + " is not below the " + events.length + " events");
        }
        data = events;
        warmup = warm;
        int nRules = spec.patterns().size();
        sigs = new long[nRules][];
        sigLens = new int[nRules];
        counts = new long[nRules];
        long loadedRss = procStatus("VmRSS");
        double load1 = load1();

        Configuration conf = new Configuration();
        conf.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        conf.set(PipelineOptions.OBJECT_REUSE, true);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, conf);
        env.setParallelism(1);

        WatermarkStrategy<BenchEvent> wm = WatermarkStrategy.<BenchEvent>forBoundedOutOfOrderness(Duration.ofMillis(oooMs))
                .withTimestampAssigner((e, ts) -> e.ts);
        DataStream<BenchEvent> stream = env
                .fromSource(new NumberSequenceSource(0, events.length - 1), WatermarkStrategy.noWatermarks(), "rows")
                .map(new RowToEvent())
                .returns(TypeInformation.of(BenchEvent.class))
                .assignTimestampsAndWatermarks(wm);
        // One CEP operator per rule, as Flink users run a ruleset: each reads the keyed stream
        // through its own keyBy edge (its own task).
        var keyed = spec.keyed() ? stream.keyBy(e -> e.customer, Types.STRING) : null;
        for (int r = 0; r < nRules; r++) {
            Pattern<BenchEvent, ?> p = spec.patterns().get(r);
            PatternStream<BenchEvent> ps = keyed != null ? CEP.pattern(keyed, p) : CEP.pattern(stream, p);
            ps.inEventTime()
                    .process(new CountMatches(r, spec.stages()), Types.LONG)
                    .name(nRules > 1 ? spec.ruleNames().get(r) : "CountMatches")
                    .sinkTo(new DiscardingSink<>());
        }

        JobClient client = env.executeAsync("cepheus-bench-" + workload);
        long capNanos = TimeUnit.SECONDS.toNanos(timeoutS);
        long submitted = System.nanoTime();
        while (true) {
            try {
                client.getJobExecutionResult().get(100, TimeUnit.MILLISECONDS);
                break;
            } catch (java.util.concurrent.TimeoutException e) {
                long first = firstNanos;
                long now = System.nanoTime();
                boolean capped = first != 0 ? now - first > capNanos : now - submitted > 2 * capNanos;
                if (capped) {
                    printResult(workload, events.length, warm, false, emitted, 0, "", 0, 0, loadedRss, load1);
                    System.out.flush();
                    Runtime.getRuntime().halt(0); // do not wait for the job: it may not stop soon
                }
            }
        }
        int closedOps;
        long[][] bufs;
        int[] lens;
        long[] cnts;
        long total;
        synchronized (closeLock) {
            closedOps = closed;
            bufs = sigs;
            lens = sigLens;
            cnts = counts;
            total = matches;
        }
        if (endNanos == 0 || startNanos == 0 || closedOps != nRules) {
            throw new IllegalStateException("the job ended without timing its run (start " + startNanos
                    + ", end " + endNanos + ", " + closedOps + " of " + nRules + " operators closed)");
        }
        List<String> all = new ArrayList<>((int) total);
        for (int r = 0; r < nRules; r++) {
            String prefix = nRules > 1 ? spec.ruleNames().get(r) + ":" : "";
            signatures(bufs[r], lens[r], cnts[r], prefix, spec.stages(), all);
        }
        String hash = hash(all);
        double seconds = (endNanos - startNanos) / 1e9;
        printResult(workload, events.length, warm, true, events.length, total, hash, seconds,
                (endCpu - startCpu) / 1e9, loadedRss, load1);
        return 0;
    }

    /** Maps a row index to its event, and starts the clock at the first event after the warm-up. */
    static final class RowToEvent extends RichMapFunction<Long, BenchEvent> {
        @Override
        public BenchEvent map(Long row) {
            int i = (int) (long) row;
            if (i == 0) {
                firstNanos = System.nanoTime();
            }
            if (i == warmup) {
                startCpu = processCpuNanos();
                startNanos = System.nanoTime();
            }
            if ((i & 1023) == 0) {
                emitted = i;
            }
            return data[i];
        }
    }

    /**
     * Counts matches and records, per match and per stage (in pattern order), the number of
     * events and their seq numbers; the strings are built and hashed after the clock stops, as
     * on the Go side. The clock stops when the last of the rules' functions closes, after the
     * final flush.
     */
    static final class CountMatches extends PatternProcessFunction<BenchEvent, Long> {
        private final int rule;
        private final String[] stages;
        private transient long[] buf;
        private transient int len;
        private transient long n;

        CountMatches(int rule, List<String> stages) {
            this.rule = rule;
            this.stages = stages.toArray(new String[0]);
        }

        @Override
        public void open(OpenContext ctx) {
            buf = new long[1 << 16];
        }

        @Override
        public void processMatch(Map<String, List<BenchEvent>> match, Context ctx, Collector<Long> out) {
            n++;
            for (String s : stages) {
                List<BenchEvent> evs = match.get(s);
                int k = evs == null ? 0 : evs.size();
                ensure(1 + k);
                buf[len++] = k;
                for (int j = 0; j < k; j++) {
                    buf[len++] = evs.get(j).seq;
                }
            }
        }

        private void ensure(int more) {
            if (len + more > buf.length) {
                buf = Arrays.copyOf(buf, Math.max(buf.length * 2, len + more));
            }
        }

        @Override
        public void close() {
            long now = System.nanoTime();
            long cpu = processCpuNanos();
            synchronized (closeLock) {
                endNanos = Math.max(endNanos, now);
                endCpu = Math.max(endCpu, cpu);
                matches += n;
                sigs[rule] = buf;
                sigLens[rule] = len;
                counts[rule] = n;
                closed++;
            }
        }
    }

    /** The same hash as benchmarks.SignatureHash on the Go side, for a workload of one rule. */
    static String signatureHash(long[] buf, int len, long count, List<String> stages) throws Exception {
        List<String> sigs = new ArrayList<>((int) count);
        signatures(buf, len, count, "", stages, sigs);
        return hash(sigs);
    }

    /**
     * Appends to out the signatures of the count matches recorded in buf by one CountMatches,
     * each starting with prefix (the rule's name and a colon in a workload of several rules).
     */
    static void signatures(long[] buf, int len, long count, String prefix, List<String> stages, List<String> out) {
        int p = 0;
        StringBuilder sb = new StringBuilder();
        for (long m = 0; m < count; m++) {
            sb.setLength(0);
            sb.append(prefix);
            for (String s : stages) {
                int k = (int) buf[p++];
                if (k == 0) {
                    continue;
                }
                if (sb.length() > prefix.length()) {
                    sb.append(';');
                }
                sb.append(s).append('=');
                for (int j = 0; j < k; j++) {
                    if (j > 0) {
                        sb.append(',');
                    }
                    sb.append(buf[p++]);
                }
            }
            out.add(sb.toString());
        }
        if (p != len) {
            throw new IllegalStateException("signature buffer: read " + p + " of " + len);
        }
    }

    /** SHA-256 over the signatures sorted, each followed by a newline; 16 hex digits. */
    static String hash(List<String> sigs) throws Exception {
        // Signatures are ASCII, so String order is byte order.
        sigs.sort(null);
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        for (String s : sigs) {
            sha.update(s.getBytes(StandardCharsets.UTF_8));
            sha.update((byte) '\n');
        }
        return HexFormat.of().formatHex(sha.digest()).substring(0, 16);
    }

    static long processCpuNanos() {
        var os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean sun) {
            return sun.getProcessCpuTime();
        }
        return 0;
    }

    /** A kB field of /proc/self/status (VmHWM, VmRSS), or 0. */
    static long procStatus(String field) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith(field + ":")) {
                    return Long.parseLong(line.substring(field.length() + 1).replace("kB", "").trim());
                }
            }
        } catch (Exception ignored) {
            // not Linux: no figure
        }
        return 0;
    }

    /** The 1-minute load average (/proc/loadavg), or 0. */
    static double load1() {
        try {
            return Double.parseDouble(Files.readString(Path.of("/proc/loadavg")).split(" ")[0]);
        } catch (Exception ignored) {
            return 0;
        }
    }

    private static void printResult(String workload, int events, int warm, boolean finished, long processed,
            long matches, String hash, double seconds, double cpu, long loadedRss, double load1) {
        String runtime = "OpenJDK " + System.getProperty("java.version") + ", Flink " + EnvironmentInformation.getVersion();
        double eps = finished ? (events - warm) / seconds : 0;
        System.out.printf(java.util.Locale.ROOT,
                "{\"engine\":\"flink\",\"workload\":\"%s\",\"events\":%d,\"warmup\":%d,\"finished\":%b,"
                        + "\"processed\":%d,\"matches\":%d,\"hash\":\"%s\",\"seconds\":%.6f,\"events_per_s\":%.3f,"
                        + "\"cpu_s\":%.6f,\"vmhwm_kib\":%d,\"rss_loaded_kib\":%d,\"runtime\":\"%s\",\"load1\":%.2f}%n",
                workload, events, warm, finished, processed, matches, hash, seconds, eps, cpu,
                procStatus("VmHWM"), loadedRss, runtime, load1);
        System.err.printf(java.util.Locale.ROOT, "flinkcep bench: %s: %s%n", workload,
                finished ? String.format(java.util.Locale.ROOT, "%.0f events/s, %d matches, hash %s", eps, matches, hash)
                        : "did not finish at " + processed + " events");
    }

    private static int usage(String why) {
        System.err.println("flinkcep bench: " + why);
        System.err.println("usage: java -jar flinkcep.jar bench --workload <W1|W2-3|W2-5|W2-7|W3|W4|W4-F> --data <file.csv>"
                + " --warmup <events> --out-of-orderness-ms <ms> [--timeout-s <s>]");
        return 2;
    }
}
