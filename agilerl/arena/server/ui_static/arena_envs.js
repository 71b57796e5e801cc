// Environments: the user's uploaded versions, and an upload form whose validation stages
// (upload, install, validation, profiling) are shown as the server streams them.

import {el, request, failure, getJSON, api} from "./dom.js";

const ENVS = "/api/cli/v1/environments";
const STAGES = ["upload", "install", "validation", "profiling"];

function envRow(env) {
  const state = env.validated ? "validated" : env.state;
  return el("tr", {"data-env": `${env.name}:${env.version}`},
    el("td", {class: "c-name"}, env.name), el("td", {}, env.version),
    el("td", {}, el("span", {class: `status ${String(state).replace(/[^a-z_]/g, "")}`}, state)),
    el("td", {}, env.profiled ? "yes" : "no"), el("td", {}, env.entrypoint ?? "–"),
    el("td", {class: "c-description"}, env.description ?? ""),
    el("td", {class: "c-error"}, env.error ?? ""), el("td", {}, env.created_at ?? "–"));
}

/** Read an NDJSON response as it arrives, calling `each(event)` per line. */
async function readEvents(response, each) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  for (;;) {
    const {value, done} = await reader.read();
    pending += decoder.decode(value || new Uint8Array(), {stream: !done});
    const parts = pending.split("\n");
    pending = parts.pop();
    for (const line of parts) if (line.trim()) each(JSON.parse(line));
    if (done) break;
  }
  if (pending.trim()) each(JSON.parse(pending));
}

/** The stages list of one upload, updated event by event. */
function stagesBox() {
  const items = new Map();
  const list = el("ol", {class: "stages", id: "stages"});
  function item(stage) {
    if (!items.has(stage)) {
      const status = el("span", {class: "status"}, "waiting");
      const text = el("span", {class: "stage-message"});
      const details = el("ul");
      const li = el("li", {"data-stage": stage}, el("span", {class: "stage-name"}, stage), status, " ", text, details);
      items.set(stage, {li, status, text, details});
      list.append(li);
    }
    return items.get(stage);
  }
  function add(event) {
    const entry = item(event.stage || "upload");
    if (event.kind === "status") {
      entry.status.textContent = event.status;
      entry.status.className = `status ${String(event.status).replace(/[^a-z_]/g, "")}`;
      entry.li.dataset.status = event.status;
      entry.text.textContent = event.message;
    } else if (event.kind === "check") {
      const result = (event.detail && event.detail.result) || {};
      const ok = result.success === true;
      const check = event.detail ? String(event.detail.check) : event.message;
      const error = result["error msg"] || result.error;  // the reference wire names it "error msg"
      const said = error ? `: ${error}` : "";
      entry.details.append(el("li", {class: `check ${ok ? "passed" : "failed"}`}, `${ok ? "✓" : "✗"} ${check}${said}`));
    } else {
      entry.details.append(el("li", {class: "log"}, event.message));
    }
  }
  return {list, add};
}

function uploadForm(done) {
  const field = (label, input) => el("label", {}, label, input);
  const name = el("input", {type: "text", name: "name", required: true, placeholder: "LineWorld"});
  const version = el("input", {type: "text", name: "version", value: "v1"});
  const description = el("input", {type: "text", name: "description"});
  const file = el("input", {type: "file", name: "file", id: "env-file", accept: ".tar.gz,.tgz,application/gzip", required: true});
  const entrypoint = el("input", {type: "text", name: "entrypoint", placeholder: "module:Class (optional when there is one)"});
  const config = el("textarea", {name: "env_config", placeholder: "constructor arguments, YAML (optional)"});
  const requirements = el("textarea", {name: "requirements", placeholder: "requirements.txt lines (optional)"});
  const rollouts = el("input", {type: "checkbox", name: "do_rollouts"});
  const multi = el("input", {type: "checkbox", name: "multi_agent"});
  const message = el("p", {class: "message", id: "upload-message"});
  const progress = el("div", {id: "upload-progress"});
  const submit = el("button", {type: "submit"}, "Upload and validate");
  const form = el("form", {class: "stack", id: "env-upload", onsubmit: async (event) => {
    event.preventDefault();
    const body = new FormData();
    for (const input of [name, version, description, entrypoint]) if (input.value.trim()) body.append(input.name, input.value.trim());
    body.append("file", file.files[0]);
    body.append("env_config", config.value);
    body.append("requirements", requirements.value);
    body.append("do_rollouts", String(rollouts.checked));
    body.append("multi_agent", String(multi.checked));
    const stages = stagesBox();
    progress.replaceChildren(stages.list);
    message.textContent = "Uploading…";
    message.className = "message";
    submit.disabled = true;
    try {
      const response = await request(`${ENVS}/create-and-validate`, {method: "POST", body});
      if (!response.ok) throw await failure(response);
      let last = null;
      await readEvents(response, (line) => { last = line; stages.add(line); });
      const passed = last && last.status === "completed" && last.stage === "profiling";
      message.textContent = passed ? "Registered and validated." : `Not validated${last ? `: ${last.message}` : ""}.`;
      message.className = `message ${passed ? "good" : "bad"}`;
    } catch (error) {
      message.textContent = error.message;
      message.className = "message bad";
    } finally {
      submit.disabled = false;
      done();
    }
  }},
  field("Name", name), field("Version", version), field("Description", description),
  field("Source archive (.tar.gz)", file), field("Entrypoint", entrypoint),
  field("Constructor arguments", config), field("Requirements", requirements),
  el("label", {class: "check"}, rollouts, "run random rollouts"),
  el("label", {class: "check"}, multi, "multi-agent (PettingZoo)"), submit);
  return el("div", {}, form, message, progress);
}

export function environmentsView() {
  const body = el("tbody");
  const empty = el("p", {class: "muted", hidden: true}, "No uploaded environments yet.");
  const note = el("p", {class: "muted", hidden: true}, "This server runs no uploaded code (it was not started with --allow-custom-code): uploads are refused.");
  const view = {
    name: "environments",
    root: null,
    async refresh() {
      const data = await getJSON(`${api.base}/environments`);
      body.replaceChildren(...data.environments.map(envRow));
      empty.hidden = data.environments.length > 0;
      note.hidden = data.custom_code;
    },
  };
  view.root = el("section", {},
    el("h1", {}, "Environments"),
    el("table", {class: "runs", id: "environments"}, el("thead", {}, el("tr", {},
      ...["Name", "Version", "State", "Profiled", "Entrypoint", "Description", "Error", "Uploaded"].map((h) => el("th", {}, h)))), body),
    empty,
    el("section", {class: "card"}, el("h2", {}, "Upload an environment"), note,
      el("p", {class: "muted small"}, `The stages (${STAGES.join(", ")}) appear below as the server runs them.`),
      uploadForm(() => view.refresh().catch(() => {}))));
  return view;
}

