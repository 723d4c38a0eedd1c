package clickhouse

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
)

// TestDamagedPartsAreErrors: a byte flipped in a column file of a part of
// the ledger's tables, on a server of the test's own, at random offsets:
// every read answers as before, or fails with a ledger.DamageError (the
// server checks each block it decompresses against its checksum); and
// verify names the table. The same after the server restarts.
func TestDamagedPartsAreErrors(t *testing.T) {
	srv := chtest.StartServer(t, "")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	conn := chtest.Conn(t, srv.DSN())
	const db = "damage"
	if err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	dsn := strings.TrimSuffix(srv.DSN(), "default") + db
	s, err := Open(ctx, Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	for i := range 48 {
		rows, wls := hourRows(i)
		if err := s.WriteHours(ctx, rows, wls); err != nil {
			t.Fatal(err)
		}
	}
	q := ledger.Query{From: h0, To: h0.Add(48 * time.Hour), Step: ledger.StepHour, GroupBy: ledger.Dimensions}
	reads := []func() (any, error){
		func() (any, error) { return s.Query(ctx, q) },
		func() (any, error) {
			return s.Query(ctx, ledger.Query{From: h0, To: h0.Add(48 * time.Hour), Step: ledger.StepDay, GroupBy: []ledger.Dimension{ledger.DimTeam}})
		},
		func() (any, error) { return s.TopWorkloads(ctx, q, 10) },
	}
	var want []any
	for _, read := range reads {
		v, err := read()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	// The column files of the active parts of each table.
	files := map[string][]string{}
	for _, table := range []string{"ledger_rows", "ledger_days", "workload_rows"} {
		if err := conn.Exec(ctx, "OPTIMIZE TABLE "+db+"."+table+" FINAL"); err != nil {
			t.Fatal(err)
		}
		rs, err := conn.Query(ctx, "SELECT name FROM system.parts WHERE database = ? AND table = ? AND active", db, table)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var part string
			if err := rs.Scan(&part); err != nil {
				t.Fatal(err)
			}
			more, _ := filepath.Glob(filepath.Join(srv.Dir, "srv", "data", "data", db, table, part, "*.bin"))
			files[table] = append(files[table], more...)
		}
		rs.Close()
		if len(files[table]) == 0 {
			t.Fatalf("no part files of %s.%s under %s", db, table, srv.Dir)
		}
	}
	outcomes := map[string]int{}
	for trial := range 9 {
		table := []string{"ledger_rows", "ledger_days", "workload_rows"}[trial%3]
		file := files[table][rng.IntN(len(files[table]))]
		orig, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		data := append([]byte(nil), orig...)
		off := rng.IntN(len(data))
		data[off] ^= byte(1 + rng.IntN(255))
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		phases := []string{"running"}
		if trial%3 == 0 {
			phases = append(phases, "restarted")
		}
		for _, phase := range phases {
			if phase == "restarted" {
				s.Close()
				srv.Kill()
				srv.Start()
				if s, err = Open(ctx, Options{DSN: dsn}); err != nil {
					t.Fatal(err)
				}
			}
			// What the server holds decompressed in memory from before
			// the flip is still right; dropped, so that reads go to disk.
			for _, c := range []string{"SYSTEM DROP UNCOMPRESSED CACHE", "SYSTEM DROP MARK CACHE"} {
				if err := chtest.Conn(t, srv.DSN()).Exec(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			failed := 0
			for i, read := range reads {
				got, err := read()
				var de *ledger.DamageError
				switch {
				case errors.As(err, &de):
					failed++
				case err != nil:
					t.Errorf("trial %d (%s +%d), %s: read %d: an error that is not a DamageError: %v", trial, filepath.Base(file), off, phase, i, err)
				case !reflect.DeepEqual(got, want[i]):
					t.Errorf("trial %d (%s of %s +%d), %s: read %d answered with a changed number", trial, filepath.Base(file), table, off, phase, i)
				}
			}
			problems, err := s.Verify(ctx, func(string) {})
			if err != nil {
				t.Errorf("trial %d, %s: verify: %v", trial, phase, err)
			}
			if failed > 0 && !slices.ContainsFunc(problems, func(p ledger.Problem) bool { return p.Table == table }) {
				t.Errorf("trial %d, %s: a read failed and verify does not name %s: %+v", trial, phase, table, problems)
			}
			outcomes[phase+map[bool]string{true: ": a read failed", false: ": no read changed"}[failed > 0]]++
		}
		if err := os.WriteFile(file, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes["running: a read failed"] < 5 {
		t.Errorf("outcomes %v: the flips did not reach the data", outcomes)
	}
}
