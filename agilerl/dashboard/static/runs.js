// The runs list: every run folder with its algorithm, environment, status, best fitness,
// steps and wall time; a filter, sortable columns, and a selection to compare.

import {el, fmt, duration, getJSON, api} from "./dom.js";

/** What the list shows; a host may replace these (the Arena lists experiments). */
export const runsList = {title: "Runs", noun: "runs",
  empty: "No run folders found yet. Train with `agilerl train MANIFEST` and they appear here.",
  columns: null};
const COLUMNS = [
  ["name", "Run"], ["algorithm", "Algorithm"], ["env", "Environment"], ["status", "Status"],
  ["best_fitness", "Best fitness"], ["steps", "Steps"], ["generations", "Gens"],
  ["wall_seconds", "Wall time"], ["updated", "Updated"],
];
const selected = new Set();
let sortKey = "updated", sortDown = true, filterText = "";

function columns() {
  return runsList.columns || COLUMNS;
}

function cell(run, key) {
  const value = run[key];
  if (key === "name") return el("a", {href: `#/run/${encodeURIComponent(run.id)}`, class: "runlink"}, run.name);
  if (key === "status") return el("span", {class: `status ${String(value).replace(/[^a-z_]/g, "")}`}, value ?? "–");
  if (key === "wall_seconds") return duration(value);
  if (key === "updated") return value ? `${duration(Date.now() / 1000 - value)} ago` : "–";
  if (typeof value === "number") return fmt(value, key === "best_fitness" ? 4 : 3);
  return value ?? "–";
}

function compare(a, b) {
  const x = a[sortKey], y = b[sortKey];
  if (x === y) return a.name.localeCompare(b.name);
  if (x === null || x === undefined) return 1;
  if (y === null || y === undefined) return -1;
  const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
  return sortDown ? -order : order;
}

function matches(run) {
  if (!filterText) return true;
  const hay = [run.name, run.algorithm, run.env, run.status, run.id].join(" ").toLowerCase();
  return filterText.toLowerCase().split(/\s+/).every((word) => hay.includes(word));
}

export function runsView() {
  let runs = [];
  const body = el("tbody");
  const head = el("tr");
  const count = el("span", {class: "muted"});
  const compareButton = el("button", {type: "button", id: "compare", disabled: true, onclick: () => {
    const query = [...selected].map((id) => `run=${encodeURIComponent(id)}`).join("&");
    location.hash = `#/compare?${query}`;
  }}, "Compare selected");
  const filter = el("input", {type: "search", id: "filter", placeholder: "filter: name, algorithm, env, status", value: filterText,
    oninput: () => { filterText = filter.value; render(); }});

  function header() {
    head.replaceChildren(el("th", {}, ""), ...columns().map(([key, label]) => el("th", {
      class: key === sortKey ? `sortable sorted ${sortDown ? "down" : "up"}` : "sortable", "data-key": key,
      onclick: () => { sortDown = key === sortKey ? !sortDown : key !== "name"; sortKey = key; header(); render(); },
    }, label)));
  }

  function render() {
    const shown = runs.filter(matches).sort(compare);
    body.replaceChildren(...shown.map((run) => {
      const box = el("input", {type: "checkbox", title: "select to compare", checked: selected.has(run.id),
        onchange: () => { if (box.checked) selected.add(run.id); else selected.delete(run.id); sync(); }});
      return el("tr", {"data-run": run.id}, el("td", {}, box), ...columns().map(([key]) => el("td", {class: `c-${key}`}, cell(run, key))));
    }));
    count.textContent = `${shown.length} of ${runs.length} ${runsList.noun}`;
    sync();
  }

  function sync() {
    for (const id of [...selected]) if (!runs.some((r) => r.id === id)) selected.delete(id);
    compareButton.disabled = selected.size < 2;
    compareButton.textContent = `Compare selected (${selected.size})`;
  }

  header();
  const table = el("table", {class: "runs", id: "runs"}, el("thead", {}, head), body);
  const empty = el("p", {class: "muted", hidden: true}, runsList.empty);
  const root = el("section", {},
    el("div", {class: "toolbar"}, el("h1", {}, runsList.title), filter, compareButton, count), table, empty);
  return {
    name: "runs", root,
    async refresh() {
      const data = await getJSON(`${api.base}/runs`);
      runs = data.runs;
      empty.hidden = runs.length > 0;
      render();
    },
  };
}
