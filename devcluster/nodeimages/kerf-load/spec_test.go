package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseCPU(t *testing.T) {
	for in, want := range map[string]int64{
		"250m": 250, "1": 1000, "0.5": 500, "1.5": 1500, "2000m": 2000, "0": 0,
		"0.1m": 1, ".25": 250, "1k": 1000000,
	} {
		got, err := parseCPU(in)
		if err != nil || got != want {
			t.Errorf("parseCPU(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "m", "-1", "1e3", "1.2.3", "lots", "1 m", "1x", "99999999999999999999"} {
		if got, err := parseCPU(in); err == nil {
			t.Errorf("parseCPU(%q) = %d; want an error", in, got)
		}
	}
}

func TestParseMemory(t *testing.T) {
	for in, want := range map[string]int64{
		"128Mi": 128 << 20, "1Gi": 1 << 30, "1.5Gi": 3 << 29, "4Ki": 4096, "1Ti": 1 << 40,
		"100k": 100000, "1M": 1000000, "2G": 2000000000, "1048576": 1048576, "0": 0,
		"0.5": 1,
	} {
		got, err := parseMemory(in)
		if err != nil || got != want {
			t.Errorf("parseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "128m", "Mi", "1MB", "1mi", "-5Mi", "1e6"} {
		if got, err := parseMemory(in); err == nil {
			t.Errorf("parseMemory(%q) = %d; want an error", in, got)
		}
	}
}

func TestParseSpec(t *testing.T) {
	current := Amounts{CPUMillis: 250, MemoryBytes: 128 << 20}
	for in, want := range map[string]Amounts{
		"cpu=300m memory=200Mi":     {300, 200 << 20},
		"  memory=1Gi\n\tcpu=1.5\n": {1500, 1 << 30},
		"cpu=100m":                  {100, 128 << 20},
		"memory=64Mi":               {250, 64 << 20},
		"cpu=250m memory=134217728": current,
	} {
		got, err := parseSpec(in, current)
		if err != nil || got != want {
			t.Errorf("parseSpec(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, wantErr := range map[string]string{
		"":                       "empty spec",
		"cpu=lots":               `"lots" is not a quantity`,
		"cpu=1 cpu=2":            "cpu is given twice",
		"disk=1Gi":               `unknown key "disk"`,
		"cpu":                    `"cpu" is not key=value`,
		"cpu= memory=1Gi":        `"cpu=" is not key=value`,
		"cpu=100m memory=128m":   "millibytes",
		"cpu=100m, memory=128Mi": `has an unknown suffix "m,"`,
	} {
		got, err := parseSpec(in, current)
		if err == nil || !strings.Contains(err.Error(), wantErr) || strings.Contains(err.Error(), "\n") {
			t.Errorf("parseSpec(%q) = %v, %v; want one line with %q", in, got, err, wantErr)
		}
		if got != current {
			t.Errorf("parseSpec(%q) changed the amounts to %v", in, got)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		amounts Amounts
		want    string
	}{
		{Amounts{250, 128 << 20}, "cpu=250m memory=128Mi"},
		{Amounts{2000, 3 << 29}, "cpu=2000m memory=1536Mi"},
		{Amounts{0, 0}, "cpu=0m memory=0"},
		{Amounts{1, 1000}, "cpu=1m memory=1000"},
		{Amounts{1, 4096}, "cpu=1m memory=4Ki"},
	} {
		if got := c.amounts.String(); got != c.want {
			t.Errorf("%#v.String() = %q; want %q", c.amounts, got, c.want)
		}
		if back, err := parseSpec(c.want, Amounts{}); err != nil || back != c.amounts {
			t.Errorf("parseSpec(%q) = %v, %v; want it back", c.want, back, err)
		}
	}
}

func TestNewestSpecWins(t *testing.T) {
	dir := t.TempDir()
	spec, control := filepath.Join(dir, "spec"), filepath.Join(dir, "control")
	if _, _, ok := newestSpec(spec, control); ok {
		t.Fatal("found a spec where there is none")
	}
	write := func(path, text string, age int) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Unix(1700000000, 0).Add(-time.Duration(age) * time.Second)
		if err := os.Chtimes(path, when, when); err != nil {
			t.Fatal(err)
		}
	}
	write(spec, "cpu=1", 10)
	if path, text, _ := newestSpec(spec, control); path != spec || text != "cpu=1" {
		t.Errorf("spec only: got %s %q", path, text)
	}
	write(control, "cpu=2", 5)
	if path, _, _ := newestSpec(spec, control); path != control {
		t.Errorf("newer control: got %s", path)
	}
	write(spec, "cpu=3", 1)
	if path, _, _ := newestSpec(spec, control); path != spec {
		t.Errorf("newer spec: got %s", path)
	}
	write(control, "cpu=4", 1)
	if path, _, _ := newestSpec(spec, control); path != control {
		t.Errorf("a tie: got %s, want the control file", path)
	}
}

func TestCgroupV1(t *testing.T) {
	sysfs := t.TempDir()
	files := map[string]string{
		"cpu/kubepods/pod1/cpu.cfs_quota_us":  "50000\n",
		"cpu/kubepods/pod1/cpu.cfs_period_us": "100000\n",
		"cpu/kubepods/pod1/cpu.shares":        "512\n",
		"cpu/kubepods/pod1/cpu.stat":          "nr_periods 10\nnr_throttled 3\nthrottled_time 12345\n",
		"memory/memory.limit_in_bytes":        "268435456\n",
		"memory/memory.usage_in_bytes":        "1000\n",
	}
	writeTree(t, sysfs, files)
	// cpu: the process's own directory exists (a host); memory: it does not (a container,
	// whose own cgroup is mounted at the controller's root).
	self := "4:memory:/kubepods/pod1/c1\n1:cpu,cpuacct:/kubepods/pod1\n"
	want := []keyValue{
		{"cpu.cfs_quota_us", "50000"}, {"cpu.cfs_period_us", "100000"}, {"cpu.shares", "512"},
		{"memory.limit_in_bytes", "268435456"}, {"memory.usage_in_bytes", "1000"},
		{"cpu.nr_throttled", "3"}, {"cpu.throttled_time", "12345"},
	}
	if got := cgroupValues(sysfs, self); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestCgroupV2(t *testing.T) {
	sysfs := t.TempDir()
	writeTree(t, sysfs, map[string]string{
		"cgroup.controllers": "cpu memory\n",
		"cpu.max":            "max 100000\n",
		"cpu.weight":         "39\n",
		"cpu.stat":           "usage_usec 5\nnr_throttled 7\nthrottled_usec 20\n",
		"memory.max":         "max\n",
		"memory.current":     "4096\n",
	})
	want := []keyValue{
		{"cpu.cfs_quota_us", "-1"}, {"cpu.cfs_period_us", "100000"}, {"cpu.shares", "998"},
		{"memory.limit_in_bytes", v1Unlimited}, {"memory.usage_in_bytes", "4096"},
		{"cpu.nr_throttled", "7"}, {"cpu.throttled_time", "20000"},
	}
	if got := cgroupValues(sysfs, "0::/\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	writeTree(t, sysfs, map[string]string{"cpu.max": "25000 50000\n", "memory.max": "1048576\n"})
	os.Remove(filepath.Join(sysfs, "cpu.stat"))
	os.Remove(filepath.Join(sysfs, "cpu.weight"))
	want = []keyValue{
		{"cpu.cfs_quota_us", "25000"}, {"cpu.cfs_period_us", "50000"},
		{"memory.limit_in_bytes", "1048576"}, {"memory.usage_in_bytes", "4096"},
	}
	if got := cgroupValues(sysfs, "0::/\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("missing files: got %v\nwant %v", got, want)
	}
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
