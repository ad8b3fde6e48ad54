package main

import "runtime/debug"

// buildVersion is the version make build and the Dockerfile stamp in
// (-ldflags "-X main.buildVersion=…"): git describe of the checkout.
var buildVersion string

// version is the binary's version: the stamped one, its module's (go
// install), or the commit it was built from.
func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel-" + s.Value[:12]
		}
	}
	return "devel"
}
