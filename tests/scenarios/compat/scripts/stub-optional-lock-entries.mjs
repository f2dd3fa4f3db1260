// Add lock entries for optional per-platform packages that `npm install` left out.
//
// rivetkit (and a few of its dependencies) declare optional dependencies on binary
// packages for every platform. When the registry in use cannot serve the other platforms'
// packages (404), `npm install` leaves them out of package-lock.json and a later `npm ci`
// refuses the lock ("Missing: … from lock file"). This script adds an entry for each such
// package with its version, `"optional": true` and the `os`/`cpu`/`libc` its name
// implies, so `npm ci` accepts the lock and skips the package on every other platform.
// The client (`rivetkit/client`) needs none of these binaries.
//
// Usage (from tests/scenarios/compat): npm install && node scripts/stub-optional-lock-entries.mjs

import { readFileSync, writeFileSync } from "node:fs";

const LOCK = new URL("../package-lock.json", import.meta.url);
const OS = ["darwin", "linux", "win32", "freebsd", "android", "openbsd", "netbsd", "sunos", "aix"];
const CPU = ["arm64", "x64", "arm", "ia32", "ppc64", "s390x", "riscv64", "loong64", "mips64el"];
const LIBC = { gnu: "glibc", musl: "musl" };

/** The `os`, `cpu` and `libc` fields implied by a platform package's name, if any. */
function platformOf(name) {
	const parts = name.split("/").pop().split("-");
	const os = parts.find((part) => OS.includes(part));
	const cpu = parts.find((part) => CPU.includes(part));
	if (os === undefined || cpu === undefined) return undefined;
	const libc = parts.map((part) => LIBC[part]).find((value) => value !== undefined);
	return { os: [os], cpu: [cpu], ...(libc ? { libc: [libc] } : {}) };
}

/** The lock path where npm would look for `dep` required by the package at `from`. */
function resolves(packages, from, dep) {
	let base = from;
	for (;;) {
		const candidate = `${base ? `${base}/` : ""}node_modules/${dep}`;
		if (candidate in packages) return true;
		if (!base) return false;
		const cut = base.lastIndexOf("/node_modules/");
		base = cut === -1 ? "" : base.slice(0, cut);
	}
}

const lock = JSON.parse(readFileSync(LOCK, "utf8"));
const added = [];
for (const [path, entry] of Object.entries(lock.packages)) {
	for (const [dep, version] of Object.entries(entry.optionalDependencies ?? {})) {
		if (resolves(lock.packages, path, dep)) continue;
		const platform = platformOf(dep);
		if (platform === undefined) {
			console.warn(`skipped ${dep}: no platform in its name`);
			continue;
		}
		if (!/^\d+\.\d+\.\d+/.test(version)) {
			console.warn(`skipped ${dep}: version ${version} is a range, not a version`);
			continue;
		}
		lock.packages[`node_modules/${dep}`] = { version, optional: true, ...platform };
		added.push(`${dep}@${version}`);
	}
}
writeFileSync(LOCK, `${JSON.stringify(lock, null, 2)}\n`);
console.log(added.length ? `added ${added.length} stub(s):\n  ${added.join("\n  ")}` : "nothing to add");
