package worker

import (
	"net/netip"
	"testing"
)

func TestPublicAddr(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ip   string
		want bool
	}{
		// Public.
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"93.184.216.34", true},
		{"172.15.255.255", true},
		{"172.32.0.0", true},
		{"100.63.255.255", true},
		{"100.128.0.0", true},
		{"2606:4700:4700::1111", true},
		{"2a00:1450:4001::200e", true},
		{"::ffff:8.8.8.8", true},
		{"64:ff9b::808:808", true}, // NAT64 of 8.8.8.8
		{"2002:808:808::1", true},  // 6to4 of 8.8.8.8

		// Loopback.
		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		// Private.
		{"10.0.0.1", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"192.168.1.1", false},
		{"fc00::1", false},
		{"fd12:3456::1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:192.168.0.10", false},
		// Link-local, including cloud metadata.
		{"169.254.169.254", false},
		{"fe80::1", false},
		{"fe80::1%eth0", false},
		{"::ffff:169.254.169.254", false},
		// Unspecified and "this network".
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"::", false},
		// Multicast and broadcast.
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"ff02::1", false},
		{"255.255.255.255", false},
		// Carrier-grade NAT.
		{"100.64.0.1", false},
		{"100.127.255.255", false},
		// Reserved and documentation.
		{"192.0.2.1", false},
		{"198.18.0.1", false},
		{"240.0.0.1", false},
		{"2001:db8::1", false},
		// IPv6 forms embedding a non-public IPv4 address.
		{"64:ff9b::7f00:1", false}, // NAT64 of 127.0.0.1
		{"2002:a00:1::1", false},   // 6to4 of 10.0.0.1
		{"::127.0.0.1", false},     // IPv4-compatible
	} {
		if got := PublicAddr(netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("PublicAddr(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
	if PublicAddr(netip.Addr{}) {
		t.Error("PublicAddr(invalid) = true, want false")
	}
}

func TestNumericIPv4(t *testing.T) {
	for host, want := range map[string]string{
		"127.1": "127.0.0.1", "127.0.1": "127.0.0.1", "2130706433": "127.0.0.1", "0x7f.1": "127.0.0.1",
		"017700000001": "127.0.0.1", "0251.0376.0251.0376": "169.254.169.254", "10.0x10203": "10.1.2.3",
		"0x": "0.0.0.0", "1.2.3.4": "1.2.3.4", "0xA9FEA9FE": "169.254.169.254",
	} {
		if got, ok := numericIPv4(host); !ok || got.String() != want {
			t.Errorf("numericIPv4(%q) = %v, %v; want %s", host, got, ok, want)
		}
	}
	for _, host := range []string{"example.com", "1.2.3.4.5", "256.1.1.1", "1.2.3.256", "1.2.65536", "4294967296", "08", "0x1g", "", "1..2", "-1", "+1"} {
		if got, ok := numericIPv4(host); ok {
			t.Errorf("numericIPv4(%q) = %v; want not an address", host, got)
		}
	}
}
