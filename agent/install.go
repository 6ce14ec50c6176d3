package agent

import (
	"context"
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
)

// Installer installs the packages a program declares on its first line,
//
//	# requirements: seaborn==0.13.2, scipy
//
// for the executions that follow. Install returns what is installed
// ("seaborn 0.13.2"), or an error whose text goes back to the model as
// feedback (a package the manifest does not allow, one the index lacks).
// Allowed names, for the model, what may be installed ("any package", or
// a list; "" nothing).
type Installer interface {
	Install(ctx context.Context, reqs []string) (installed []string, err error)
	Allowed() string
}

// declaredRe matches a program's declaration of its requirements.
var declaredRe = lazyre.New(`(?m)\A(?:#![^\n]*\n)?#\s*requirements:\s*([^\n]*)`)

// declared returns the requirements a Python program declares on its first
// line (after a #! line), or nil.
func declared(code string) []string {
	m := declaredRe.FindStringSubmatch(code)
	if m == nil {
		return nil
	}
	var out []string
	for _, r := range strings.Split(m[1], ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// install installs what code declares when it declares something new;
// ok false means the attempt ends with the feedback said.
func (r *run) install(ctx context.Context, n int, code string, at *Attempt) (ok bool, err error) {
	reqs := declared(code)
	if len(reqs) == 0 || r.a.lang.Name != "python" || strings.Join(reqs, ",") == r.installed {
		return true, nil
	}
	in := r.a.deps.Installer
	var msg string
	if _, grantable := in.(PackageGranter); in == nil || (in.Allowed() == "" && !(grantable && r.approving())) {
		msg = "Nothing can be installed here: remove the # requirements line and use only the packages named at the start."
	} else {
		got, ierr := in.Install(ctx, reqs)
		if ierr == nil {
			r.installed = strings.Join(reqs, ",")
			r.a.log.Info("installed the program's requirements", "requirements", reqs, "installed", got)
			return true, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		msg = "Installing " + strings.Join(reqs, ", ") + " failed: " + r.a.redact.String(ierr.Error()) +
			". Packages that may be installed here: " + in.Allowed() + "."
	}
	at.ErrorClass = ClassImport
	d := r.feedbackData(n)
	d["Message"] = msg
	r.say(render("install.txt", d))
	r.fail(n, ClassImport, msg)
	return false, nil
}

// installable names what a program may declare to be installed, or "".
func (r *run) installable() string {
	if in := r.a.deps.Installer; in != nil && r.a.lang.Name == "python" {
		if _, ok := in.(PackageGranter); ok && r.approving() {
			if a := in.Allowed(); a != "" {
				return a + "; others when the person supervising the run approves"
			}
			return "any package, when the person supervising the run approves"
		}
		return in.Allowed()
	}
	return ""
}

// importHint is the hint for a failed import: how to declare a package
// when an installer is there.
func (r *run) importHint() string {
	if in := r.a.deps.Installer; in != nil && in.Allowed() != "" && r.a.lang.Name == "python" {
		return "a package that is not installed may be declared on the program's first line, as `# requirements: NAME==VERSION, OTHER`; it is installed before the program runs. Packages that may be installed here: " + in.Allowed() + "."
	}
	return classHints[ClassImport]
}

// installPackages is tool mode's install_packages: the packages installed
// with what the run has, then the kernel restarted so that it imports
// them.
func (t *toolRun) installPackages(ctx context.Context, list string, st *Step) (string, error) {
	var reqs []string
	for _, r := range strings.Split(list, ",") {
		if r = strings.TrimSpace(r); r != "" {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) == 0 {
		return refuse(st, ClassBadToolCall, "install_packages needs packages, e.g. seaborn==0.13.2"), nil
	}
	if t.approving() || t.a.deps.Reviewer != nil {
		gv, err := t.gate(ctx, gate{n: t.at.N, step: st.N, phase: PhaseTool, tool: ToolInstallPackages, lang: "python",
			code: "# requirements: " + strings.Join(reqs, ", ") + "\n", declares: true})
		if err != nil {
			return "", err
		}
		if !gv.run {
			return refuse(st, gv.class, "nothing was installed: %s", gv.why), nil
		}
		if gv.edited {
			if reqs = declared(gv.code); len(reqs) == 0 {
				return refuse(st, ClassRejected, "nothing was installed: the person supervising the run removed every package"), nil
			}
		}
	}
	got, err := t.a.deps.Installer.Install(ctx, reqs)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		st.ErrorClass = ClassImport
		return "error: installing " + strings.Join(reqs, ", ") + " failed: " + t.a.redact.String(err.Error()), nil
	}
	if t.kern != nil {
		if err := t.kern.Restart(ctx); err != nil {
			return "", err
		}
	}
	return "Installed: " + strings.Join(got, ", ") + ". The kernel restarted: variables and loaded data are gone; import and load again.", nil
}
