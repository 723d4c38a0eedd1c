package attribution

// Booking: a device's closed observations become its holders' usage in
// the hours they fall in.

import (
	"math"
	"math/bits"
)

// finalize books the pending observation for covMs milliseconds (what a
// forced close booked of it already excepted): time and energy to its
// holders by share, energy of a free device to nobody.
func (a *Attributor) finalize(in *instance, covMs int64) {
	in.close(a)
	a.servingActivity(in)
	in.pending = false
	in.lastMs = in.t
	in.prev = append(in.prev[:0], in.holders...)
	end := in.t + covMs
	if in.bookedUntil == 0 {
		a.bookSpan(in, in.t, end, in.observationMJ(covMs), in.t, end)
	} else {
		rest := max(in.observationMJ(covMs)-in.bookedMJ, 0)
		a.bookSpan(in, in.bookedUntil, end, rest, in.bookedUntil, end)
	}
	in.bookedUntil, in.bookedMJ = 0, 0
}

// bookPartial books, at a forced close, what is certain of the pending
// observation before end: its first scrape interval, whatever comes next,
// exactly as a booking of that interval would. The observation stays open;
// finalize books the rest.
func (a *Attributor) bookPartial(in *instance, end int64) {
	in.close(a)
	si := a.opts.ScrapeIntervalMs
	in.bookedMJ += a.bookSpan(in, in.t, in.t+si, in.observationMJ(si), max(in.t, in.bookedUntil), end)
	in.bookedUntil = max(in.bookedUntil, end)
}

// bookSpan books [clipFrom, clipTo) of an observation that spans [from,
// to) with energyMJ: the span is cut at hour boundaries, energy split over
// the pieces by time (the last piece takes what rounding left), and the
// pieces inside the clip (whose ends are span ends or hour boundaries) are
// booked, those of closed hours dropped. It returns the energy of the
// pieces inside the clip.
func (a *Attributor) bookSpan(in *instance, from, to, energyMJ, clipFrom, clipTo int64) int64 {
	if to <= from || clipTo <= clipFrom {
		return 0
	}
	var shares []int64
	if len(in.holders) > 0 {
		shares = a.shareNums(in)
	}
	act, measured := in.activity()
	span := to - from
	var split, clipped int64
	for start := from; start < to; {
		h := floorHour(start)
		pieceEnd := min(to, h+hourMs)
		ms := pieceEnd - start
		pieceMJ := mulDiv(energyMJ, ms, span)
		if pieceEnd == to {
			pieceMJ = energyMJ - split
		}
		split += pieceMJ
		if start >= clipFrom && pieceEnd <= clipTo {
			clipped += pieceMJ
			if h >= a.emittedUntilMs {
				a.book(h, in, shares, ms, act, measured, pieceMJ)
			}
		}
		start = pieceEnd
	}
	return clipped
}

// maxPartsFactor × MaxHolders bounds the holders one device-hour keeps.
const maxPartsFactor = 16

func (a *Attributor) book(hour int64, in *instance, shares []int64, ms int64, act float64, measured bool, energyMJ int64) {
	ih := &a.hour(hour).inst[in.idx]
	ih.coveredMs += ms
	if len(in.holders) == 0 {
		ih.nobodyMJ += energyMJ
		return
	}
	var given int64
	for i, h := range in.holders {
		u := ih.part(h, a.opts.MaxHolders*maxPartsFactor)
		if u == nil {
			a.reject(ReasonTooManyHolders)
			continue
		}
		w := ms * in.size * shares[i]
		u.heldW += w
		if measured {
			u.activeW += int64(math.Round(float64(w) * act))
		} else {
			u.unmeasuredW += w
		}
		e := energyMJ * shares[i] / ShareUnits
		u.energyMJ += e
		given += e
	}
	// Rounding and unrequested replicas leave some energy to nobody.
	ih.nobodyMJ += energyMJ - given
}

// part returns h's usage, adding it when there is room.
func (ih *instHour) part(h holder, limit int) *usage {
	for i := range ih.parts {
		if ih.parts[i].h == h {
			return &ih.parts[i]
		}
	}
	if len(ih.parts) >= limit {
		return nil
	}
	ih.parts = append(ih.parts, usage{h: h})
	return &ih.parts[len(ih.parts)-1]
}

func (a *Attributor) hour(h int64) *hourState {
	hs := a.hours[h]
	if hs == nil {
		hs = &hourState{inst: make([]instHour, len(a.insts))}
		a.hours[h] = hs
	}
	return hs
}

func floorHour(ms int64) int64 {
	h := ms / hourMs * hourMs
	if h > ms {
		h -= hourMs
	}
	return h
}

// mulDiv returns a × b / c for non-negative a, b and positive c, in 128
// bits: exact where a × b overflows int64.
func mulDiv(a, b, c int64) int64 {
	if a <= 0 || b <= 0 || c <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}
