package io.cepheus.flinkcep.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads a workload data file (CSV with a header line naming the columns; no quoting, as
 * internal/gen's WriteBenchCSV writes it) into memory, before any timing. An empty cell is null
 * (0 for a number). Equal strings share one copy, as on the Go side.
 */
final class BenchData {
    private BenchData() {}

    static BenchEvent[] read(Path path) throws IOException {
        try (BufferedReader in = Files.newBufferedReader(path, StandardCharsets.UTF_8)) {
            String header = in.readLine();
            if (header == null) {
                throw new IOException(path + ": no header line");
            }
            String[] cols = header.split(",", -1);
            for (String c : cols) {
                switch (c) {
                    case "ts", "customer", "kind", "amount", "country", "home" -> {}
                    default -> throw new IOException(path + ": unknown column " + c);
                }
            }
            Map<String, String> strings = new HashMap<>();
            List<BenchEvent> out = new ArrayList<>(1 << 20);
            String line;
            long row = 0;
            while ((line = in.readLine()) != null) {
                row++;
                String[] cells = line.split(",", -1);
                if (cells.length != cols.length) {
                    throw new IOException(path + ": row " + row + ": " + cells.length + " cells, want " + cols.length);
                }
                BenchEvent e = new BenchEvent();
                e.seq = row;
                for (int i = 0; i < cols.length; i++) {
                    String v = cells[i];
                    if (v.isEmpty()) {
                        continue;
                    }
                    switch (cols[i]) {
                        case "ts" -> e.ts = Long.parseLong(v);
                        case "amount" -> e.amount = Double.parseDouble(v);
                        case "customer" -> e.customer = strings.computeIfAbsent(v, s -> s);
                        case "kind" -> e.kind = strings.computeIfAbsent(v, s -> s);
                        case "country" -> e.country = strings.computeIfAbsent(v, s -> s);
                        case "home" -> e.home = strings.computeIfAbsent(v, s -> s);
                        default -> throw new IllegalStateException(cols[i]);
                    }
                }
                out.add(e);
            }
            return out.toArray(new BenchEvent[0]);
        }
    }
}
