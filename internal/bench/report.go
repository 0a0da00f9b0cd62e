package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as text: a header, one row per phase, the
// ratios to the raw limit, and what the columns measure.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "clasp bench: %s, %s/%s, %d CPUs (GOMAXPROCS %d), %s per phase, %d issues\n",
		r.GoVersion, r.GOOS, r.GOARCH, r.NumCPU, r.GOMAXPROCS, r.Duration, r.Issues)
	fmt.Fprintf(w, "server: %s\n", r.Server)
	switch {
	case r.SeedAgents > 0:
		fmt.Fprintf(w, "seeded: %d filler issues (done) and %d filler agents (a key and a finished run each) in each company of the http target before its phases; the http-base target (a second in-process server, no filler) runs in the same turns\n", r.SeedIssues, r.SeedAgents)
	case r.SeedIssues > 0:
		fmt.Fprintf(w, "seeded: %d filler issues (done) in each company of the http target before its phases; the http-base target (a second in-process server, no filler) runs in the same turns\n", r.SeedIssues)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\ttarget\tsync\tclients\tops\tops/s\tp50 ms\tp95 ms\tp99 ms\tCPU s/1k ops\tDB CPU s/1k ops\tpeak RSS MiB\twrites/commit\terrors\t")
	for _, x := range r.Results {
		batch := "-"
		if x.Commits > 0 {
			batch = strconv.FormatFloat(float64(x.Writes)/float64(x.Commits), 'f', 1, 64)
		}
		sync := x.Sync
		if sync == "" {
			sync = "-"
		}
		dbCPU := "-"
		if x.DBCPUSecondsPer1000 > 0 {
			dbCPU = strconv.FormatFloat(x.DBCPUSecondsPer1000, 'f', 3, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.3f\t%s\t%.0f\t%s\t%d\t\n",
			x.Workload, x.Target, sync, x.Clients, x.Ops, x.OpsPerS, x.P50Ms, x.P95Ms, x.P99Ms, x.CPUSecondsPer1000, dbCPU, x.PeakRSSMB, batch, x.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintln(w)
		for _, x := range r.Ratios {
			if x.RawPostgres > 0 || x.LimitPostgres > 0 {
				if x.LimitPostgres > 0 {
					fmt.Fprintf(w, "%s clients=%d: http / limit = %.2f, raw / limit = %.2f (PostgreSQL, synchronous_commit=%s: http %.0f, raw %.0f, limit %.0f ops/s)\n",
						x.Workload, x.Clients, x.VsLimitPostgres, x.RawVsLimitPostgres, x.HTTPSync, x.HTTP, x.RawPostgres, x.LimitPostgres)
				}
				if x.RawPostgres > 0 {
					fmt.Fprintf(w, "%s clients=%d: http (PostgreSQL, synchronous_commit=%s) %.0f ops/s = %.2f x raw pgx (%.0f ops/s, the same statements, one round trip each)\n",
						x.Workload, x.Clients, x.HTTPSync, x.HTTP, x.VsRawPostgres, x.RawPostgres)
				}
				continue
			}
			if x.LimitNormal > 0 {
				fmt.Fprintf(w, "%s clients=%d: http / limit = %.2f x NORMAL, %.2f x FULL; raw / limit = %.2f (FULL), %.2f (NORMAL) (http sync %s %.0f ops/s; limit FULL %.0f, NORMAL %.0f ops/s)\n",
					x.Workload, x.Clients, x.VsLimitNormal, x.VsLimitFull, x.RawFullVsLimitFull, x.RawNormalVsLimitNormal, x.HTTPSync, x.HTTP, x.LimitFull, x.LimitNormal)
			}
			if x.RawFull > 0 {
				fmt.Fprintf(w, "%s clients=%d: http (sync %s) %.0f ops/s = %.2f x raw FULL (%.0f ops/s, one fsync per commit), %.2f x raw NORMAL (%.0f ops/s)",
					x.Workload, x.Clients, x.HTTPSync, x.HTTP, x.VsRawFull, x.RawFull, x.VsRawNorm, x.RawNormal)
				if x.BatchWrite > 0 {
					fmt.Fprintf(w, "; %.1f writes per commit", x.BatchWrite)
				}
				fmt.Fprintln(w)
			}
		}
	}
	if len(r.ClaimRatios) > 0 {
		fmt.Fprintln(w)
		for _, x := range r.ClaimRatios {
			fmt.Fprintf(w, "claim clients=%d: %.0f ops/s = %.2f x cycle (%.0f ops/s, http, interleaved)\n", x.Clients, x.Claim, x.Ratio, x.Cycle)
		}
	}
	for _, x := range r.Results {
		if x.Workload == WorkloadClaim {
			fmt.Fprintf(w, "claim clients=%d: %d issues claimed, %d refused claims, %d claimed more than once, %d never claimed\n", x.Clients, x.Ops, x.Conflicts, x.Duplicates, x.Unclaimed)
		}
	}
	for _, x := range r.Results {
		if x.Target == TargetHTTP && x.FirstP50Ms > 0 {
			what := map[string]string{WorkloadCycle: "checkout", WorkloadClaim: "claim"}[x.Workload]
			fmt.Fprintf(w, "%s clients=%d: %s request alone p50 %.2f ms, p99 %.2f ms\n", x.Workload, x.Clients, what, x.FirstP50Ms, x.FirstP99Ms)
		}
	}
	if len(r.Scale) > 0 {
		fmt.Fprintln(w)
	}
	for _, x := range r.Scale {
		if x.SeededAgents > 0 {
			fmt.Fprintf(w, "scale %s clients=%d: %d issues, %d agents vs %d issues, %d agents per company (interleaved): op p50 %.2f vs %.2f ms = %.2f x, p99 %.2f vs %.2f ms = %.2f x",
				x.Workload, x.Clients, x.SeededIssues, x.SeededAgents, x.BaseIssues, x.BaseAgents, x.SeededP50, x.BaseP50, x.P50Ratio, x.SeededP99, x.BaseP99, x.P99Ratio)
		} else {
			fmt.Fprintf(w, "scale %s clients=%d: %d vs %d issues per company (interleaved): op p50 %.2f vs %.2f ms = %.2f x, p99 %.2f vs %.2f ms = %.2f x",
				x.Workload, x.Clients, x.SeededIssues, x.BaseIssues, x.SeededP50, x.BaseP50, x.P50Ratio, x.SeededP99, x.BaseP99, x.P99Ratio)
		}
		if what := map[string]string{WorkloadCycle: "checkout", WorkloadClaim: "claim"}[x.Workload]; what != "" && x.BaseFirstP50 > 0 {
			fmt.Fprintf(w, "; %s request alone p50 %.2f vs %.2f ms = %.2f x, p99 %.2f vs %.2f ms = %.2f x",
				what, x.SeededFirstP50, x.BaseFirstP50, x.FirstP50Ratio, x.SeededFirstP99, x.BaseFirstP99, x.FirstP99Ratio)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	names := make([]string, 0, len(r.OpUnits))
	for k := range r.OpUnits {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(w, "op (%s): %s\n", k, r.OpUnits[k])
	}
	fmt.Fprintf(w, "CPU: %s\n", r.CPUMeasures)
	if r.DBCPUMeasures != "" {
		fmt.Fprintf(w, "DB CPU: %s\n", r.DBCPUMeasures)
	}
	fmt.Fprintln(w, "peak RSS: the process's resident-set high-water mark during the phase (Linux VmHWM, reset per phase)")
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
	return nil
}
