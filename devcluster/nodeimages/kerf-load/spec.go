package main

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Amounts is what kerf-load is told to use.
type Amounts struct {
	CPUMillis   int64
	MemoryBytes int64
}

func (a Amounts) String() string {
	return fmt.Sprintf("cpu=%s memory=%s", formatCPU(a.CPUMillis), formatMemory(a.MemoryBytes))
}

var suffixes = map[string]*big.Rat{
	"":   big.NewRat(1, 1),
	"m":  big.NewRat(1, 1000),
	"k":  big.NewRat(1e3, 1),
	"M":  big.NewRat(1e6, 1),
	"G":  big.NewRat(1e9, 1),
	"T":  big.NewRat(1e12, 1),
	"Ki": big.NewRat(1<<10, 1),
	"Mi": big.NewRat(1<<20, 1),
	"Gi": big.NewRat(1<<30, 1),
	"Ti": big.NewRat(1<<40, 1),
}

// parseQuantity reads a Kubernetes quantity without sign or exponent: a decimal number
// and one of the suffixes above.
func parseQuantity(s string) (*big.Rat, error) {
	end := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end < 0 {
		end = len(s)
	}
	number, suffix := s[:end], s[end:]
	if strings.Count(number, ".") > 1 || strings.Trim(number, ".") == "" {
		return nil, fmt.Errorf("%q is not a quantity", s)
	}
	mult, ok := suffixes[suffix]
	if !ok {
		return nil, fmt.Errorf("%q has an unknown suffix %q", s, suffix)
	}
	value, ok := new(big.Rat).SetString(number)
	if !ok {
		return nil, fmt.Errorf("%q is not a quantity", s)
	}
	return value.Mul(value, mult), nil
}

// ceilInt64 rounds up, as Kubernetes does for sub-unit quantities (0.1m is 1m).
func ceilInt64(q *big.Rat, what string, s string) (int64, error) {
	quo, rem := new(big.Int).QuoRem(q.Num(), q.Denom(), new(big.Int))
	if rem.Sign() > 0 {
		quo.Add(quo, big.NewInt(1))
	}
	if !quo.IsInt64() {
		return 0, fmt.Errorf("%s %q is too large", what, s)
	}
	return quo.Int64(), nil
}

// parseCPU returns millicores: "250m", "1", "0.5", "2000m".
func parseCPU(s string) (int64, error) {
	q, err := parseQuantity(s)
	if err != nil {
		return 0, err
	}
	return ceilInt64(q.Mul(q, big.NewRat(1000, 1)), "cpu", s)
}

// parseMemory returns bytes: "128Mi", "1Gi", "100M", "1048576".
func parseMemory(s string) (int64, error) {
	if strings.HasSuffix(s, "m") {
		// Valid for Kubernetes (millibytes) but always a mistake here.
		return 0, fmt.Errorf("%q is in millibytes; did you mean %sMi?", s, strings.TrimSuffix(s, "m"))
	}
	q, err := parseQuantity(s)
	if err != nil {
		return 0, err
	}
	return ceilInt64(q, "memory", s)
}

// parseSpec applies "cpu=<quantity> memory=<quantity>" (either may be left out) to current.
func parseSpec(text string, current Amounts) (Amounts, error) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return current, errors.New("empty spec")
	}
	seen := map[string]bool{}
	next := current
	for _, field := range fields {
		key, value, ok := strings.Cut(field, "=")
		if !ok || value == "" {
			return current, fmt.Errorf("%q is not key=value", field)
		}
		if seen[key] {
			return current, fmt.Errorf("%s is given twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "cpu":
			next.CPUMillis, err = parseCPU(value)
		case "memory":
			next.MemoryBytes, err = parseMemory(value)
		default:
			err = fmt.Errorf("unknown key %q (cpu or memory)", key)
		}
		if err != nil {
			return current, err
		}
	}
	return next, nil
}

func formatCPU(millis int64) string {
	return fmt.Sprintf("%dm", millis)
}

func formatMemory(bytes int64) string {
	for _, unit := range []struct {
		suffix string
		size   int64
	}{{"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if bytes != 0 && bytes%unit.size == 0 {
			return fmt.Sprintf("%d%s", bytes/unit.size, unit.suffix)
		}
	}
	return fmt.Sprintf("%d", bytes)
}
