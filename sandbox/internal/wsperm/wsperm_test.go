package wsperm

import "testing"

func TestModes(t *testing.T) {
	private := NewRoot(1000, 1000, 0o755)
	shared := NewRoot(1000, 50, 0o2775)
	cases := []struct {
		name string
		got  uint32
		want uint32
	}{
		{"new file 0777 in a 0755 workspace", private.NewMode(0o777, false, 0o755), 0o755},
		{"new file 0666 in a group-writable workspace", shared.NewMode(0o666, false, 0o2775), 0o664},
		{"new dir in a setgid dir", shared.NewMode(0o777, true, 0o2775), 0o2775},
		{"new file with setuid asked", private.NewMode(0o4755, false, 0o755), 0o755},
		{"chmod 0777 of an existing 0755 dir", private.ChangedMode(0o755, 0o777, true, false), 0o755},
		{"chmod 0777 of an existing 0775 dir", private.ChangedMode(0o775, 0o777, true, false), 0o775},
		{"chmod 0700 of a setgid dir keeps setgid", shared.ChangedMode(0o2775, 0o700, true, false), 0o2700},
		{"chmod +x of a 0644 file", private.ChangedMode(0o644, 0o755, false, false), 0o755},
		{"a written setuid file", private.ChangedMode(0o4755, 0o4755, false, true), 0o755},
		{"a written 0640 file keeps its mode", private.ChangedMode(0o640, 0o640, false, true), 0o640},
		{"an untouched setuid file", private.ChangedMode(0o4755, 0o4755, false, false), 0o4755},
		{"chmod of a setuid file drops setuid", private.ChangedMode(0o4755, 0o700, false, false), 0o700},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %#o, want %#o", c.name, c.got, c.want)
		}
	}
	if uid, gid := shared.NewOwner(0o2775, 77); uid != 1000 || gid != 77 {
		t.Errorf("owner in a setgid dir of group 77: %d:%d", uid, gid)
	}
	if uid, gid := private.NewOwner(0o755, 77); uid != 1000 || gid != 1000 {
		t.Errorf("owner in a plain dir: %d:%d", uid, gid)
	}
}
