// The job card of an experiment's page: its state, stop and resume, the best checkpoint's
// download and the job's output, all through the JSON API the CLI uses.

import {el, fmt, request, failure, download, api} from "./dom.js";

const JOBS = "/api/cli/v1/experiments/jobs";
const STOPPABLE = new Set(["PENDING", "QUEUED", "STARTING", "RUNNING"]);
const RESUMABLE = new Set(["COMPLETED", "FAILED", "STOPPED"]);
const MAX_LINES = 2000;

async function post(path, body) {
  const response = await request(path, {method: "POST", body: JSON.stringify(body),
    headers: {"Content-Type": "application/json"}});
  if (!response.ok) throw await failure(response);
  return (await response.json()).data;
}

/** The card for experiment `id`: {root, refresh(detail)}. */
export function jobCard(id) {
  let job = null;
  let logOffset = -1;
  let lines = 0;
  const state = el("span", {class: "status", id: "job-state"});
  const facts = el("span", {class: "muted"});
  const message = el("p", {class: "message", id: "job-message"});
  const maxSteps = el("input", {type: "number", min: 1, id: "resume-steps", title: "max_steps of the resumed run"});
  const stop = el("button", {type: "button", id: "job-stop", onclick: () => act("stop", {})}, "Stop");
  const resume = el("button", {type: "button", id: "job-resume", onclick: () =>
    act("resume", {max_steps: Number(maxSteps.value)})}, "Resume");
  const best = el("button", {type: "button", id: "job-download", onclick: async () => {
    const query = new URLSearchParams({experiment_name: job.experiment_name, project: job.project});
    try {
      await download(`${JOBS}/checkpoints/download?${query}`);
      say("Downloading the best checkpoint.", "good");
    } catch (error) {
      say(error.message, "bad");
    }
  }}, "Download best checkpoint");
  const log = el("pre", {class: "log", id: "job-log"});
  const logNote = el("p", {class: "muted small"});
  const root = el("section", {class: "card", id: "s-job"}, el("h2", {}, "Job"),
    el("div", {class: "controls"}, state, facts, stop, el("label", {}, "resume to ", maxSteps, " steps"), resume, best),
    message, el("h3", {}, "Output"), logNote, log);

  function say(text, kind) {
    message.textContent = text;
    message.className = `message ${kind}`;
  }

  async function act(action, extra) {
    say(action === "stop" ? "Stopping…" : "Resuming…", "");
    try {
      const row = await post(`${JOBS}/${action}`, {experiment_name: job.experiment_name, project: job.project, ...extra});
      say(`${action === "stop" ? "Stop requested" : "Resumed"}: the job is ${row.state}.`, "good");
    } catch (error) {
      say(error.message, "bad");
    }
  }

  async function refreshLog() {
    const response = await request(`${api.base}/runs/${encodeURIComponent(id)}/logs?offset=${logOffset}`);
    if (!response.ok) throw await failure(response);
    const page = await response.json();
    if (logOffset < 0 && page.skipped) logNote.textContent = "Earlier output is not shown (the CLI's `arena logs` prints it all).";
    logOffset = page.offset;
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    for (const line of page.lines) {
      log.append(el("span", {class: line.stream === "stderr" ? "stderr" : null}, line.message + "\n"));
      lines += 1;
    }
    while (lines > MAX_LINES && log.firstChild) { log.firstChild.remove(); lines -= 1; }
    if (atEnd) log.scrollTop = log.scrollHeight;
  }

  return {
    root,
    async refresh(detail) {
      job = detail.summary;
      state.textContent = job.state;
      state.className = `status ${String(job.state).toLowerCase().replace(/[^a-z_]/g, "")}`;
      facts.textContent = `project ${job.project} · attempt ${job.attempt} · ${fmt(job.agent_steps)} of ${fmt(job.max_steps)} steps`;
      stop.disabled = !STOPPABLE.has(job.state);
      resume.disabled = !RESUMABLE.has(job.state) || !detail.checkpoints.length;
      best.disabled = !detail.checkpoints.length;
      if (!maxSteps.value) maxSteps.value = String(job.max_steps * 2);
      if (job.error && !message.textContent) say(job.error, "bad");
      await refreshLog().catch((error) => { logNote.textContent = error.message; });
    },
  };
}
