package deploy

// A lint of docker/Dockerfile.* for the rules hadolint would enforce and the ones this
// project adds (no Docker engine or hadolint runs here): pinned base images, multi-stage
// builds whose final stage has no compilers and runs as a non-root user, apt used the
// slim way, downloads verified by checksum.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// DockerInstruction is one instruction, continuation lines joined.
type DockerInstruction struct {
	Line    int
	Command string // upper case: FROM, RUN, ...
	Args    string
	// Ignored hadolint rules from a `# hadolint ignore=DL3008,...` comment right above.
	Ignored map[string]bool
	// Whether the stage's SHELL sets -o pipefail when this instruction runs.
	PipefailShell bool
}

// DockerStage is one FROM and what follows it.
type DockerStage struct {
	Image, Name  string
	Instructions []DockerInstruction
}

// ParseDockerfile splits a Dockerfile into stages; ARGs before the first FROM are
// returned as defaults for substitution into FROM lines.
func ParseDockerfile(path string) ([]DockerStage, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var stages []DockerStage
	globalArgs := map[string]string{}
	ignored := map[string]bool{}
	sc := bufio.NewScanner(f)
	lineNo := 0
	var pending strings.Builder
	start := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if pending.Len() == 0 {
			if strings.HasPrefix(trimmed, "# hadolint ignore=") {
				for _, r := range strings.Split(strings.TrimPrefix(trimmed, "# hadolint ignore="), ",") {
					ignored[strings.TrimSpace(r)] = true
				}
				continue
			}
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			start = lineNo
		} else if strings.HasPrefix(trimmed, "#") {
			continue // comments inside a continued instruction
		}
		if strings.HasSuffix(trimmed, "\\") {
			pending.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		pending.WriteString(trimmed)
		text := pending.String()
		pending.Reset()
		fields := strings.SplitN(text, " ", 2)
		ins := DockerInstruction{Line: start, Command: strings.ToUpper(fields[0]), Ignored: ignored}
		ignored = map[string]bool{}
		if len(fields) > 1 {
			ins.Args = strings.TrimSpace(fields[1])
		}
		switch {
		case ins.Command == "FROM":
			parts := strings.Fields(ins.Args)
			st := DockerStage{Image: parts[0]}
			if len(parts) == 3 && strings.EqualFold(parts[1], "AS") {
				st.Name = parts[2]
			}
			stages = append(stages, st)
		case len(stages) == 0 && ins.Command == "ARG":
			kv := strings.SplitN(ins.Args, "=", 2)
			if len(kv) == 2 {
				globalArgs[kv[0]] = strings.Trim(kv[1], `"`)
			}
		case len(stages) > 0:
			st := &stages[len(stages)-1]
			if n := len(st.Instructions); n > 0 {
				ins.PipefailShell = st.Instructions[n-1].PipefailShell
			}
			if ins.Command == "SHELL" {
				ins.PipefailShell = strings.Contains(ins.Args, "pipefail")
			}
			st.Instructions = append(st.Instructions, ins)
		}
	}
	return stages, globalArgs, sc.Err()
}

var argRefRE = regexp.MustCompile(`\$\{?(\w+)\}?`)

func expandArgs(s string, args map[string]string) string {
	return argRefRE.ReplaceAllStringFunc(s, func(m string) string {
		return args[argRefRE.FindStringSubmatch(m)[1]]
	})
}

// Packages that are compilers or build tools; none may be installed in a final stage.
var buildOnlyPackage = regexp.MustCompile(`^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|clang(-\d+)?|cmake|make|ninja-build|.*-dev|cuda-nvcc.*|cuda-toolkit.*)$`)

func aptPackages(run string) []string {
	var out []string
	for _, part := range strings.Split(run, "&&") {
		part = strings.TrimSpace(part)
		i := strings.Index(part, "apt-get install")
		if i < 0 {
			continue
		}
		for _, w := range strings.Fields(part[i+len("apt-get install"):]) {
			if !strings.HasPrefix(w, "-") {
				out = append(out, strings.SplitN(w, "=", 2)[0])
			}
		}
	}
	return out
}

func TestDockerfilesLint(t *testing.T) {
	files, _ := filepath.Glob(SourcePath("docker", "Dockerfile.*"))
	want := map[string]bool{"Dockerfile.operator": false, "Dockerfile.worker": false, "Dockerfile.worker-cpu": false}
	for _, f := range files {
		name := filepath.Base(f)
		if _, ok := want[name]; ok {
			want[name] = true
		}
		problems, err := LintDockerfile(f)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("docker/%s: %s", name, p)
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("docker/%s is missing", name)
		}
	}
	if _, err := os.Stat(SourcePath(".dockerignore")); err != nil {
		t.Error("no .dockerignore: the whole build tree would be sent as context")
	}
}

// The lint must catch what it claims to.
func TestDockerfileLintCatchesProblems(t *testing.T) {
	bad := `FROM ubuntu AS build
RUN apt-get update
RUN apt-get install gcc && curl -o /x https://example.invalid/x.sh | sh
WORKDIR src
FROM ubuntu:latest
RUN apt-get update && apt-get install -y --no-install-recommends g++ && rm -rf /var/lib/apt/lists/*
ENTRYPOINT /bin/app
`
	path := filepath.Join(t.TempDir(), "Dockerfile.bad")
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	problems, err := LintDockerfile(path)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(problems, "\n")
	for _, want := range []string{
		"stage 0: base image ubuntu is not pinned", "stage 1: base image ubuntu:latest is not pinned",
		"apt-get update alone", "DL3015", "DL3014", "DL3009", "DL3008", "piping a download",
		"without a sha256sum", "relative WORKDIR", "build-only package g++", "non-root USER", "exec (JSON) form",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("the lint missed %q; it reported:\n%s", want, joined)
		}
	}
}

// LintDockerfile returns every problem found in one Dockerfile.
func LintDockerfile(path string) ([]string, error) {
	stages, args, err := ParseDockerfile(path)
	if err != nil {
		return nil, err
	}
	var problems []string
	report := func(format string, a ...interface{}) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if len(stages) < 2 {
		report("%d stages; build and runtime must be separate stages", len(stages))
		if len(stages) == 0 {
			return problems, nil
		}
	}
	names := map[string]bool{}
	for i, st := range stages {
		image := expandArgs(st.Image, args)
		if !names[st.Image] { // not FROM an earlier stage
			switch {
			case image == "" || strings.Contains(image, "$"):
				report("stage %d: base image %q does not resolve from the ARG defaults", i, st.Image)
			case strings.Contains(image, "@sha256:"):
			case !strings.Contains(image, ":") || strings.HasSuffix(image, ":latest"):
				report("stage %d: base image %s is not pinned to a tag", i, image)
			case !regexp.MustCompile(`:[^:]*\d`).MatchString(image):
				report("stage %d: base image %s is pinned to a moving tag (use a versioned one)", i, image)
			}
		}
		if st.Name != "" {
			names[st.Name] = true
		}
		for _, ins := range st.Instructions {
			problems = append(problems, lintInstruction(ins)...)
		}
	}

	final := stages[len(stages)-1]
	if img := expandArgs(final.Image, args); strings.Contains(img, "devel") {
		report("final stage is built on a devel image (%s): compilers would ship", img)
	}
	user := ""
	copiedFromBuild := false
	for _, ins := range final.Instructions {
		switch ins.Command {
		case "USER":
			user = ins.Args
		case "RUN":
			for _, p := range aptPackages(ins.Args) {
				if buildOnlyPackage.MatchString(p) {
					report("line %d: final stage installs build-only package %s", ins.Line, p)
				}
			}
		case "COPY":
			if strings.Contains(ins.Args, "--from=") {
				copiedFromBuild = true
			}
		case "ENTRYPOINT", "CMD":
			if !strings.HasPrefix(ins.Args, "[") {
				report("line %d: %s in shell form; use the exec (JSON) form so signals reach the process", ins.Line, ins.Command)
			}
		}
	}
	uid := strings.SplitN(user, ":", 2)[0]
	if user == "" || uid == "0" || uid == "root" {
		report("final stage runs as %q; it must set a non-root USER", user)
	} else if !regexp.MustCompile(`^[1-9]\d*$`).MatchString(uid) {
		report("USER %s: use a numeric uid so runAsNonRoot can verify it", user)
	}
	if n := len(final.Instructions); n == 0 || (final.Instructions[n-1].Command != "ENTRYPOINT" && final.Instructions[n-1].Command != "CMD") {
		report("final stage does not end with ENTRYPOINT/CMD")
	}
	if !copiedFromBuild {
		report("final stage copies nothing from a build stage")
	}
	return problems, nil
}

func lintInstruction(ins DockerInstruction) []string {
	var problems []string
	report := func(format string, a ...interface{}) {
		problems = append(problems, fmt.Sprintf("line %d: ", ins.Line)+fmt.Sprintf(format, a...))
	}
	a := ins.Args
	switch ins.Command {
	case "ADD":
		if strings.Contains(a, "://") {
			report("ADD of a URL (DL3020); download with curl and verify a checksum")
		}
	case "MAINTAINER":
		report("MAINTAINER is deprecated (DL4000)")
	case "WORKDIR":
		if !strings.HasPrefix(a, "/") && !strings.HasPrefix(a, "$") {
			report("relative WORKDIR (DL3000)")
		}
	case "RUN":
		if strings.Contains(a, "apt-get install") {
			if !strings.Contains(a, "--no-install-recommends") {
				report("apt-get install without --no-install-recommends (DL3015)")
			}
			if !regexp.MustCompile(`apt-get install[^&]*\s(-y|--yes)\b`).MatchString(a) {
				report("apt-get install without -y (DL3014)")
			}
			if !strings.Contains(a, "rm -rf /var/lib/apt/lists/*") {
				report("apt lists not removed in the same RUN (DL3009)")
			}
			if !strings.Contains(a, "apt-get update") {
				report("apt-get install without apt-get update in the same RUN (a stale cache layer)")
			}
			if !ins.Ignored["DL3008"] {
				for _, p := range aptPackages(a) {
					if !strings.Contains(p, "=") {
						report("package %s neither pinned nor DL3008 explicitly ignored", p)
					}
				}
			}
		} else if strings.Contains(a, "apt-get update") {
			report("apt-get update alone in a RUN (DL3009: its cache layer goes stale)")
		}
		if regexp.MustCompile(`(^|[;&|]\s*)apt\s`).MatchString(a) {
			report("use apt-get, not apt (DL3027)")
		}
		if regexp.MustCompile(`\b(curl|wget)\b[^|]*\|\s*(ba)?sh\b`).MatchString(a) {
			report("piping a download into a shell")
		}
		if regexp.MustCompile(`\b(curl|wget)\b[^&;|]*(://|"\$)`).MatchString(a) && !strings.Contains(a, "sha256sum -c") {
			report("a download without a sha256sum -c check")
		}
		if strings.Contains(a, "sudo ") {
			report("sudo in a Dockerfile (DL3004)")
		}
		if regexp.MustCompile(`(^|&&)\s*cd\s`).MatchString(a) {
			report("cd in RUN; use WORKDIR (DL3003)")
		}
		if strings.Contains(a, "|") && !strings.Contains(a, "||") && !ins.PipefailShell {
			report("a pipe without SHELL [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"] (DL4006)")
		}
	}
	return problems
}

// buildPackageList is the file scripts/deps.sh and every image's build stage install from.
const buildPackageList = "scripts/build-packages.txt"

// Every stage that builds headroom must install scripts/deps.sh's build packages from the
// shared list: an image with its own copy of the list drifts (a new library added to
// deps.sh, the image's configure failing at pkg_check_modules).
func TestDockerfileBuildStagesInstallTheSharedPackageList(t *testing.T) {
	list, err := os.ReadFile(SourcePath(buildPackageList))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(list), "libpcre2-dev") || !strings.Contains(string(list), "libutf8proc-dev") {
		t.Errorf("%s lacks the tokenizer's libraries (libpcre2-dev, libutf8proc-dev)", buildPackageList)
	}
	deps, err := os.ReadFile(SourcePath("scripts", "deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(deps), filepath.Base(buildPackageList)) {
		t.Errorf("scripts/deps.sh does not read %s", buildPackageList)
	}
	files, _ := filepath.Glob(SourcePath("docker", "Dockerfile.*"))
	for _, f := range files {
		stages, _, err := ParseDockerfile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range stages {
			for _, p := range buildStageListProblems(st) {
				t.Errorf("docker/%s stage %d: %s", filepath.Base(f), i, p)
			}
		}
	}
}

// buildStageListProblems: what is wrong with how a stage that runs `cmake --build` gets
// its packages (nothing for other stages).
func buildStageListProblems(st DockerStage) []string {
	copiedTo := ""
	installsList := false
	for _, ins := range st.Instructions {
		switch {
		case ins.Command == "COPY" && strings.Contains(ins.Args, buildPackageList):
			fields := strings.Fields(ins.Args)
			copiedTo = fields[len(fields)-1]
		case ins.Command == "RUN" && copiedTo != "" && strings.Contains(ins.Args, copiedTo) &&
			regexp.MustCompile(`xargs\s+apt-get install`).MatchString(ins.Args):
			installsList = true
		case ins.Command == "RUN" && strings.Contains(ins.Args, "cmake --build"):
			if copiedTo == "" {
				return []string{"builds without copying " + buildPackageList + " first"}
			}
			if !installsList {
				return []string{"builds without installing " + copiedTo + " (xargs apt-get install)"}
			}
		}
	}
	return nil
}
