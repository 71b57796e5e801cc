// The Arena server's pages: the dashboard's run views over the signed-in user's experiments,
// job controls on each run page, and pages for environments and datasets.
//
// The API key (or an access token) is kept in this tab's sessionStorage and sent as the
// Authorization header, exactly as the CLI sends it; the server sets no cookie, so another
// site cannot make this browser send an authenticated request.

import {start, show} from "./app.js";
import {api, el, request, failure} from "./dom.js";
import {runsList} from "./runs.js";
import {runCards} from "./run.js";
import {jobCard} from "./arena_job.js";
import {environmentsView} from "./arena_envs.js";
import {datasetsView} from "./arena_datasets.js";

const KEY = "arena-token";
let who = null;

function token() {
  return sessionStorage.getItem(KEY);
}

function signOut() {
  sessionStorage.removeItem(KEY);
  who = null;
  header();
}

function header() {
  document.getElementById("nav").hidden = !token();
  document.getElementById("logout").hidden = !token();
  document.getElementById("who").textContent = who ? `signed in as ${who}` : "";
}

api.base = "/api/ui";
api.headers = () => (token() ? {Authorization: `Bearer ${token()}`} : {});
api.unauthorized = () => {
  // a key that was revoked, or an access token that expired: ask again
  signOut();
  if (!location.hash.startsWith("#/login")) location.hash = "#/login?expired=1";
};

runsList.title = "Experiments";
runsList.noun = "experiments";
runsList.empty = "No experiments yet. Submit one with `arena train MANIFEST` (or the Python client) and it appears here.";
runsList.columns = [
  ["name", "Experiment"], ["project", "Project"], ["algorithm", "Algorithm"], ["env", "Environment"],
  ["status", "State"], ["best_fitness", "Best fitness"], ["agent_steps", "Steps"],
  ["max_steps", "Max steps"], ["wall_seconds", "Wall time"], ["updated", "Updated"],
];
runCards.push(jobCard);

function loginView(query) {
  const input = el("input", {type: "password", id: "api-key", autocomplete: "off", required: true,
    placeholder: "arena_pat_…"});
  const message = el("p", {class: "message bad", id: "login-message"},
    query.get("expired") ? "Your key was refused (revoked or expired); sign in again." : "");
  const form = el("form", {class: "stack", id: "login", onsubmit: async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    message.textContent = "";
    const response = await fetch("/api/users/current", {cache: "no-store",
      headers: {Authorization: `Bearer ${key}`}});
    if (!response.ok) {
      message.textContent = (await failure(response)).message;
      return;
    }
    sessionStorage.setItem(KEY, key);
    who = (await response.json()).data.username;
    header();
    location.hash = "#/";
  }},
  el("label", {}, "API key or access token", input),
  el("button", {type: "submit"}, "Sign in"));
  const root = el("section", {class: "narrow"},
    el("h1", {}, "Sign in to Arena"),
    el("p", {}, "Paste an API key (", el("code", {}, "arena-server tokens create --data-dir DIR --user NAME"),
      " prints one). It is kept in this browser tab only and sent with each request."),
    form, message,
    el("p", {class: "muted small"}, "Approving a login of the command-line client? ",
      el("a", {href: "/device"}, "Open the device login page"), "."));
  return {name: "login", root, still: true, async refresh() { input.focus(); }};
}

function guard(path) {
  if (path === "/login") return null;
  if (!token()) return loginView(new URLSearchParams());
  return null;
}

async function whoami() {
  if (!token()) return;
  try {
    who = (await (await request("/api/users/current")).json()).data.username;
  } catch (error) {
    who = null;
  }
  header();
}

document.getElementById("logout").addEventListener("click", () => {
  signOut();
  if (location.hash === "#/login") show();
  else location.hash = "#/login";
});
header();
whoami();
start({views: {"/login": loginView, "/environments": environmentsView, "/datasets": datasetsView}, guard});
