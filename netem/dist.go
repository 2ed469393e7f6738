package netem

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// distScale is NETEM_DIST_SCALE (include/uapi/linux/pkt_sched.h): a table
// entry of distScale means one jitter (sigma) above the mean delay.
const distScale = 8192

// Distribution names netem's delay distributions, as tc spells them.
// Uniform sends no table: the kernel then draws uniformly in
// [delay-jitter, delay+jitter).
const (
	DistUniform      = "uniform"
	DistNormal       = "normal"
	DistPareto       = "pareto"
	DistParetoNormal = "paretonormal"
)

// Distributions lists the names --distribution accepts.
var Distributions = []string{DistUniform, DistNormal, DistPareto, DistParetoNormal}

// DistTable returns the 4096-entry delay distribution table for name,
// computed exactly as iproute2's generators in netem/normal.c, pareto.c
// and paretonormal.c compute the files tc loads from /usr/lib/tc/*.dist:
// entries are an inverse CDF in units of sigma/8192, clamped to int16.
// Uniform returns nil (no table). Unknown names return an error.
func DistTable(name string) ([]int16, error) {
	distMu.Lock()
	defer distMu.Unlock()
	if t, ok := distCache[name]; ok {
		return slices.Clone(t), nil
	}
	t, err := makeDistTable(name)
	if err != nil {
		return nil, err
	}
	distCache[name] = t
	return slices.Clone(t), nil
}

// distCache keeps computed tables: the normal inverse walks 400,000 erf
// evaluations, which is slow under emulation (the VM tests apply often).
var (
	distMu    sync.Mutex
	distCache = map[string][]int16{}
)

func makeDistTable(name string) ([]int16, error) {
	switch name {
	case DistUniform:
		return nil, nil
	case DistNormal:
		inv := normalInverse()
		out := make([]int16, 0, distEntries)
		for i := 0; i < normalSize; i += 4 {
			out = append(out, clampInt16(int(math.RoundToEven(inv[i]*distScale))))
		}
		return out, nil
	case DistPareto:
		out := make([]int16, 0, distEntries)
		for i := 65536; i > 0; i -= 16 {
			out = append(out, int16(paretoValue(i)))
		}
		return out, nil
	case DistParetoNormal:
		inv := normalInverse()
		out := make([]int16, 0, distEntries)
		for i := 0; i < normalSize; i += 4 {
			norm := int(math.RoundToEven(inv[i] * distScale))
			par := paretoValue(65536 - 4*i)
			// C integer division truncates toward zero, as Go's does.
			out = append(out, clampInt16((norm+3*par)/4))
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown distribution %q (want one of uniform, normal, pareto, paretonormal)", name)
}

const (
	normalSize  = 16384
	distEntries = 4096
)

// normalInverse tabulates the inverse standard normal CDF on a grid of
// 16384 as normal.c does: it walks x from -10 to 10 in steps of .00005
// (the same float64 accumulation, so the same rounding) and keeps the
// last x that lands on each cell.
func normalInverse() []float64 {
	table := make([]float64, normalSize+1)
	for x := -10.0; x < 10.05; x += .00005 {
		i := int(math.RoundToEven(normalSize * (.5 + .5*math.Erf(x/math.Sqrt(2.0)))))
		table[i] = x
	}
	return table
}

// paretoValue is pareto.c's entry for i in (0, 65536]: a Pareto with
// shape 3 shifted by its mean 1.5 and scaled by 4/3, clamped at 32767.
func paretoValue(i int) int {
	v := float64(i) / 65536
	v = 1.0 / math.Pow(v, 1.0/3.0)
	v -= 1.5
	v *= (4.0 / 3.0) * distScale
	if v > 32767 {
		v = 32767
	}
	return int(math.RoundToEven(v))
}

func clampInt16(v int) int16 {
	if v < math.MinInt16 {
		return math.MinInt16
	}
	if v > math.MaxInt16 {
		return math.MaxInt16
	}
	return int16(v)
}
