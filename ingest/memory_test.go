package ingest

import "testing"

func TestParseBytes(t *testing.T) {
	f := func(in string, want int64) {
		t.Helper()
		got, err := ParseBytes(in)
		if want < 0 {
			if err == nil {
				t.Errorf("%q: %d, want an error", in, got)
			}
			return
		}
		if err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	f("1073741824", 1<<30)
	f("1GiB", 1<<30)
	f("512MiB", 512<<20)
	f("1.5GiB", 3<<29)
	f("2GB", 2e9)
	f("64KiB", 64<<10)
	f("100B", 100)
	f(" 4 GiB ", 4<<30)
	f("", -1)
	f("lots", -1)
	f("-1GiB", -1)
	f("0", -1)
	f("1e30", -1)
}

// TestBudgetFor: 1 GiB gives the bodies in flight 128 MiB, the window
// 256 MiB, the pods 131,072 at 1 KiB; a large limit keeps the explicit
// bounds.
func TestBudgetFor(t *testing.T) {
	b := BudgetFor(1<<30, 128<<20, 500_000)
	if b.Inflight != 128<<20 || b.Buffer != 256<<20 || b.Pods != 131_072 || b.GoLimit != (1<<30)/10*8 {
		t.Errorf("1 GiB: %+v", b)
	}
	b = BudgetFor(64<<30, 128<<20, 500_000)
	if b.Inflight != 128<<20 || b.Buffer != 16<<30 || b.Pods != 500_000 {
		t.Errorf("64 GiB: %+v", b)
	}
}

// FuzzParseBytes: any flag value is a size above 0 or an error; never a
// panic.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1GiB", "512MiB", "2e9", "", "-1", "1e400KiB", "NaN", "Inf GiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err == nil && n <= 0 {
			t.Fatalf("%q: %d without an error", s, n)
		}
	})
}
