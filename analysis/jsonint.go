package analysis

import "math/bits"

// The integers of AppendJSON's lines, written as strconv.AppendUint and
// AppendInt (base 10) write them but in place: strconv formats into a
// buffer of its own and copies it onto dst, and integers were over half
// of a line's encoding (BenchmarkFsyncEncoderAppend: 10 to 30 of them a
// line, start_ns and end_ns 15-20 digits each). TestAppendUintMatchesStrconv
// holds them to strconv's bytes.

// twoDigits holds "00" to "99".
const twoDigits = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// pow10 holds 10^0 to 10^19.
var pow10 = func() (t [20]uint64) {
	t[0] = 1
	for i := 1; i < len(t); i++ {
		t[i] = t[i-1] * 10
	}
	return t
}()

// appendUint appends v in decimal: eight digits at a time in 32-bit
// arithmetic, then two at a time.
func appendUint(dst []byte, v uint64) []byte {
	t := (bits.Len64(v|1) * 1233) >> 12 // ≈ log10(v): the length is t or t+1
	n := t + 1
	if v|1 < pow10[t] { // v|1: 0 has one digit; no other v changes length
		n = t
	}
	l := len(dst)
	if cap(dst)-l < n {
		dst = append(dst, make([]byte, n)...)
	} else {
		dst = dst[:l+n]
	}
	i := l + n
	for v >= 1e8 {
		q := v / 1e8
		r := uint32(v - q*1e8)
		v = q
		hi, lo := r/1e4, r%1e4
		put4(dst[i-8:i-4], hi)
		put4(dst[i-4:i], lo)
		i -= 8
	}
	w := uint32(v)
	for w >= 100 {
		q := w / 100
		r := (w - q*100) * 2
		i -= 2
		dst[i], dst[i+1] = twoDigits[r], twoDigits[r+1]
		w = q
	}
	if w >= 10 {
		dst[i-2], dst[i-1] = twoDigits[w*2], twoDigits[w*2+1]
	} else {
		dst[i-1] = byte('0' + w)
	}
	return dst
}

// put4 writes x (< 10000) as four digits, leading zeros kept.
func put4(b []byte, x uint32) {
	hi, lo := (x/100)*2, (x%100)*2
	b[0], b[1], b[2], b[3] = twoDigits[hi], twoDigits[hi+1], twoDigits[lo], twoDigits[lo+1]
}

// appendInt appends v in decimal, a minus sign first when negative.
func appendInt(dst []byte, v int64) []byte {
	if v < 0 {
		return appendUint(append(dst, '-'), uint64(-v)) // -MinInt64 wraps to its magnitude
	}
	return appendUint(dst, uint64(v))
}
