// The Arena server's pages: the dashboard's run views over the signed-in user's experiments,
// job controls on each run page, and pages for environments and datasets.
//
// The API key (or a device login's tokens) is kept in this tab's sessionStorage and sent as
// the Authorization header, exactly as the CLI sends it; the server sets no cookie, so
// another site cannot make this browser send an authenticated request.

import {start, show} from "./app.js";
import {api, request} from "./dom.js";
import {loginView, renew, session} from "./arena_login.js";
import {runsList} from "./runs.js";
import {runCards} from "./run.js";
import {jobCard} from "./arena_job.js";
import {environmentsView} from "./arena_envs.js";
import {datasetsView} from "./arena_datasets.js";

let who = null;

function signOut() {
  session.clear();
  who = null;
  header();
}

function header() {
  document.getElementById("nav").hidden = !session.token();
  document.getElementById("logout").hidden = !session.token();
  document.getElementById("who").textContent = who ? `signed in as ${who}` : "";
}

api.base = "/api/ui";
api.headers = () => (session.token() ? {Authorization: `Bearer ${session.token()}`} : {});
api.unauthorized = async () => {
  if (await renew()) return true;  // a device login's access token expired: renewed
  // a key that was revoked, or a session that ended: ask again
  signOut();
  if (!location.hash.startsWith("#/login")) location.hash = "#/login?expired=1";
  return false;
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

function login(query) {
  return loginView(query, (name) => {
    who = name;
    header();
    if (location.hash === "#/") show();  // the sign-in page stood in for the list
    else location.hash = "#/";
  });
}

function guard(path) {
  if (path === "/login") return null;
  if (!session.token()) return login(new URLSearchParams());
  return null;
}

async function whoami() {
  if (!session.token()) return;
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
start({views: {"/login": login, "/environments": environmentsView, "/datasets": datasetsView}, guard});
