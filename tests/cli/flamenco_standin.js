// A minimal stand-in for the Flamenco Manager's job compiler (the only stand-in in the suite:
// no Manager can run here). Written from Flamenco's "Job Types" documentation: a job type file
// defines JOB_TYPE and compileJob(job); the compiler gives it the globals `author` (Task(name,
// type) with addCommand/addDependency, Command(name, parameters)), `path` (POSIX path helpers)
// and `print`, and a `job` with `settings` and addTask(task).
//
// usage: node flamenco_standin.js JOB_TYPE_FILE SETTINGS_JSON  -> prints {job_type, tasks} or
// {error} as JSON on stdout.
"use strict";
const fs = require("fs");
const vm = require("vm");
const nodePath = require("path").posix;

const [file, settingsJson] = process.argv.slice(2);

class Task {
    constructor(name, type) { this.name = name; this.type = type; this.commands = []; this.dependencies = []; }
    addCommand(command) { this.commands.push(command); }
    addDependency(task) { this.dependencies.push(task.name); }
}

const author = {
    Task: (name, type) => new Task(name, type),
    Command: (name, parameters) => ({ name: name, parameters: parameters }),
};
const job = { settings: JSON.parse(settingsJson), tasks: [], addTask(task) { this.tasks.push(task); } };
const sandbox = { author: author, path: nodePath, print: (...a) => console.error(...a), JSON: JSON };
vm.createContext(sandbox);
vm.runInContext(fs.readFileSync(file, "utf8") + "\n;this.JOB_TYPE = JOB_TYPE; this.compileJob = compileJob;", sandbox,
                { filename: file });
try {
    sandbox.compileJob(job);
    console.log(JSON.stringify({ job_type: sandbox.JOB_TYPE, tasks: job.tasks }));
} catch (err) {
    console.log(JSON.stringify({ error: err.message }));
}
