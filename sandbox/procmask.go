package sandbox

// MaskedProc are the /proc entries every backend hides from programs
// (covered by an empty file or directory): they tell about the host's
// kernel, memory layout, devices and other users, and a program has no use
// for them. The list is Docker's masked paths plus the page, slab and
// memory maps, the kernel log, the I/O maps and the key users.
var MaskedProc = []string{
	"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/key-users",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
	"/proc/kpageflags", "/proc/kpagecount", "/proc/kpagecgroup", "/proc/slabinfo", "/proc/vmallocinfo",
	"/proc/pagetypeinfo", "/proc/kmsg", "/proc/iomem", "/proc/ioports", "/proc/mtrr", "/proc/zoneinfo",
	"/proc/config.gz", "/proc/kallsyms",
}
