// The dashboard page: a hash router over three views (runs list, one run, compare), each
// polling the JSON API so that a run being trained updates without a reload. A host (the
// Arena server) starts it with views of its own and a guard run before every view.

import {runsView} from "./runs.js";
import {runView} from "./run.js";
import {compareView} from "./compare.js";

const POLL_MS = 2000;
let current = null;
let options = {views: {}, guard: null};

function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  if (options.guard) {
    const redirect = options.guard(path);
    if (redirect) return redirect;
  }
  if (options.views[path]) return options.views[path](new URLSearchParams(query || ""));
  if (path.startsWith("/run/")) return runView(decodeURIComponent(path.slice(5)));
  if (path === "/compare") return compareView(new URLSearchParams(query || "").getAll("run"));
  return runsView();
}

/** Show the view of the current location (again). */
export async function show() {
  if (current) current.stop = true;
  const started = performance.now();
  const app = document.getElementById("app");
  const view = route();
  current = view;
  document.body.dataset.view = view.name;
  delete document.body.dataset.ready;
  app.replaceChildren(view.root);
  await poll(view);
  if (view.stop) return;
  document.body.dataset.ready = "1";
  // since navigation start (the page's load time on a first view) and since this view began
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.viewMs = String(Math.round(performance.now() - started));
  if (!view.still) schedule(view);
}

async function poll(view) {
  const live = document.getElementById("live");
  try {
    await view.refresh();
    live.textContent = view.still ? "" : "live";
    live.className = view.still ? "live" : "live ok";
  } catch (error) {
    live.textContent = `offline: ${error.message}`;
    live.className = "live bad";
  }
}

function schedule(view) {
  setTimeout(async () => {
    if (view.stop) return;
    if (!document.hidden) await poll(view);
    schedule(view);
  }, POLL_MS);
}

/** Start the page. `views` maps extra hash paths ("/login") to view factories; `guard(path)`
 * may return a view to show instead of the one asked for (a login page). */
export function start(settings = {}) {
  options = {...options, ...settings};
  window.addEventListener("hashchange", show);
  window.addEventListener("resize", () => current && current.resize && current.resize());
  show();
}
