// SPDX-License-Identifier: GPL-3.0-or-later
//
// Kinema Nodes shot batch as a Flamenco job type: one Flamenco task per shot, each running
// `kinema-nodes bake` with that shot's arguments (the same arguments `kinema-nodes batch`
// gives it; see kinema_nodes/core/shot/batch.py, Shot.bake_arguments).
//
// A shot that bakes but has flagged frames exits 3, so Flamenco marks its task failed: the
// shot is on disk and its flags are in the task log; requeue it or accept it.
//
// Install: copy this file into the Flamenco Manager's `scripts/` folder and restart the Manager.
// Flamenco's job compiler runs JavaScript without file access, so the job carries the manifest
// itself (setting `manifest`, the JSON text of a `kinema-nodes batch` manifest) and the folder
// its relative paths are relative to, as the Workers see it (`manifest_dir`).
//
// Written from Flamenco's job-type documentation (flamenco.blender.org, "Job Types": JOB_TYPE,
// compileJob(job), author.Task, author.Command, task.addCommand, job.addTask, path); tested with
// Node.js against a small stand-in of that API (tests/cli/test_flamenco.py), not a real Manager.

const JOB_TYPE = {
    label: "Kinema Nodes Bake",
    description: "Bake robot IK shots from a kinema-nodes batch manifest: one task per shot",
    settings: [
        { key: "manifest", type: "string", required: true,
          description: "The batch manifest's JSON text: a list of shots, or {defaults, shots}" },
        { key: "manifest_dir", type: "string", subtype: "dir_path", required: true,
          description: "Folder the manifest's relative paths are relative to, as the Workers see it" },
        { key: "kinema_nodes", type: "string", default: "kinema-nodes",
          description: "The kinema-nodes command on the Workers (a path, or a name on PATH)" },
    ],
};

const SHOT_KEYS = ["name", "robot", "link", "targets", "out", "joints_out", "report", "preset", "solver", "start", "fps",
                   "speed_limit", "limits", "obstacles"];
const LIMIT_KEYS = ["check", "margin", "max_acc", "max_jerk"];
const ROBOT_FILE_SUFFIXES = [".urdf", ".xacro", ".xml"];

function isAbsolute(p) {
    return p.startsWith("/") || /^[A-Za-z]:[\\/]/.test(p);
}

function resolve(dir, p) {
    return isAbsolute(p) ? path.join(p) : path.join(dir, p);
}

function where(index, name) {
    return `shot ${index + 1}` + (typeof name === "string" ? ` ('${name}')` : "");
}

// Python's repr() of a float, as `kinema-nodes batch` writes numbers: 24 -> "24.0".
function number(value, what, positive) {
    if (typeof value !== "number" || !isFinite(value) || (positive && value <= 0)) {
        throw new Error(`${what} must be a ${positive ? "positive " : ""}number, got ${JSON.stringify(value)}`);
    }
    return Number.isInteger(value) ? value.toFixed(1) : String(value);
}

function stem(p) {
    const base = path.basename(p);
    const dot = base.lastIndexOf(".");
    return dot > 0 ? base.slice(0, dot) : base;
}

function bakeArguments(raw, index, dir, defaults) {
    if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
        throw new Error(`${where(index)}: must be an object with robot, targets and out`);
    }
    const shot = Object.assign({}, defaults, raw);
    const at = where(index, shot.name);
    for (const key of Object.keys(shot)) {
        if (!SHOT_KEYS.includes(key)) throw new Error(`${at}: unknown key '${key}'`);
    }
    for (const key of ["robot", "targets", "out"]) {
        if (!(key in shot)) throw new Error(`${at}: needs '${key}'`);
    }
    if (shot.obstacles) throw new Error(`${at}: 'obstacles' is not supported: kinema-nodes bake has no obstacle option yet`);
    if (!String(shot.out).toLowerCase().endsWith(".blend")) throw new Error(`${at}: out '${shot.out}' must end in .blend`);
    const robot = String(shot.robot);
    const robotIsFile = ROBOT_FILE_SUFFIXES.some((s) => robot.toLowerCase().endsWith(s)) || robot.includes("/");
    const out = resolve(dir, shot.out);
    const solver = shot.solver === undefined ? "numpy" : shot.solver;
    if (solver !== "numpy" && solver !== "pyroki") throw new Error(`${at}: solver must be 'numpy' or 'pyroki'`);
    const args = ["bake", robotIsFile ? resolve(dir, robot) : robot, "--targets", resolve(dir, shot.targets), "--out", out,
                  "--solver", solver];
    if (shot.link != null) args.push("--link", String(shot.link));
    if (shot.joints_out != null) args.push("--joints-out", resolve(dir, shot.joints_out));
    if (shot.report != null) args.push("--report", resolve(dir, shot.report));
    if (shot.preset != null) {
        const preset = String(shot.preset);
        args.push("--preset", preset.toLowerCase().endsWith(".json") ? resolve(dir, preset) : preset);
    }
    const start = shot.start || {};
    const names = Object.keys(start);
    if (names.length) {
        args.push("--start", ...names.map((n) => `${n}=${number(start[n], `${at}: start '${n}'`, false)}`));
    }
    if (shot.fps != null) args.push("--fps", number(shot.fps, `${at}: fps`, true));
    if (shot.speed_limit != null) args.push("--speed-limit", number(shot.speed_limit, `${at}: speed_limit`, true));
    const limits = shot.limits || {};
    for (const key of Object.keys(limits)) {
        if (!LIMIT_KEYS.includes(key)) throw new Error(`${at}: limits: unknown key '${key}'`);
    }
    if (limits.check) args.push("--check-limits");
    for (const [key, option] of [["margin", "--margin"], ["max_acc", "--max-acc"], ["max_jerk", "--max-jerk"]]) {
        if (limits[key] != null) args.push(option, number(limits[key], `${at}: limits ${key}`, false));
    }
    return { name: shot.name != null ? String(shot.name) : stem(out), args: args };
}

function compileJob(job) {
    const settings = job.settings;
    let data;
    try {
        data = JSON.parse(settings.manifest);
    } catch (err) {
        throw new Error(`manifest is not valid JSON: ${err.message}`);
    }
    let defaults = {};
    if (data !== null && typeof data === "object" && !Array.isArray(data)) {
        defaults = data.defaults || {};
        data = data.shots;
    }
    if (!Array.isArray(data) || data.length === 0) throw new Error("manifest must hold a non-empty list of shots");
    const exe = settings.kinema_nodes || "kinema-nodes";
    const seen = {};
    data.forEach((raw, index) => {
        const shot = bakeArguments(raw, index, settings.manifest_dir, defaults);
        if (seen[shot.name]) throw new Error(`two shots are named '${shot.name}'`);
        seen[shot.name] = true;
        const task = author.Task(`bake-${shot.name}`, "misc");
        task.addCommand(author.Command("exec", { exe: exe, args: shot.args }));
        job.addTask(task);
    });
}
