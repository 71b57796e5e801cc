// One run: summary, learning curves, training metrics, hyperparameters per member, the
// lineage tree, checkpoints and files, and the resolved manifest. New metrics rows and
// events are fetched incrementally ("since") while the run trains.

import {el, fmt, bytes, duration, when, colour, getJSON, runPath, downloadPath, downloadLink} from "./dom.js";
import {LineChart} from "./chart.js";
import {drawLineage} from "./lineage.js";
import {runsList} from "./runs.js";

const AGENT = /^(train|eval)\/agent_(\d+)\/(.+)$/;
const STEP = "train/global_step", GENERATION = "train/generation";

/** metrics.csv and events.jsonl of one run, kept up to date by fetching what is new. */
export class RunData {
  constructor(id) {
    this.id = id;
    this.columns = [];
    this.rows = [];
    this.events = [];
    this.recorded = false;
    this.metricsFile = null;
    this.eventsFile = null;
  }

  async refreshMetrics() {
    const data = await getJSON(runPath(this.id, `/metrics?since=${this.rows.length}`));
    const rewritten = data.file !== this.metricsFile || data.total < this.rows.length
      || data.columns.join("\n") !== this.columns.join("\n");
    if (rewritten && this.rows.length) {  // a new column, or a resume that dropped rows
      const whole = await getJSON(runPath(this.id, "/metrics?since=0"));
      [this.columns, this.rows, this.metricsFile] = [whole.columns, whole.rows, whole.file];
      return true;
    }
    [this.columns, this.metricsFile] = [data.columns, data.file];
    this.rows.push(...data.rows);
    return data.rows.length > 0 || rewritten;
  }

  async refreshEvents() {
    const data = await getJSON(runPath(this.id, `/events?since=${this.events.length}`));
    const before = this.recorded;
    this.recorded = data.recorded;
    if ((data.file !== this.eventsFile || data.total < this.events.length) && this.events.length) {
      const whole = await getJSON(runPath(this.id, "/events?since=0"));  // rewritten on resume
      [this.events, this.eventsFile] = [whole.events, whole.file];
      return true;
    }
    this.eventsFile = data.file;
    this.events.push(...data.events);
    return data.events.length > 0 || before !== this.recorded;
  }

  column(name) {
    const j = this.columns.indexOf(name);
    return j < 0 ? [] : this.rows.map((row) => row[j]);
  }

  /** [[x, y], ...] of column `name` against column `x`. */
  points(name, x = STEP) {
    const xs = this.column(x), ys = this.column(name);
    return ys.map((y, i) => [xs[i], y]);
  }

  /** Per-member columns: Map(metric name -> Map(member -> column name)). */
  agentColumns() {
    const found = new Map();
    for (const name of this.columns) {
      const match = AGENT.exec(name);
      if (!match) continue;
      const key = `${match[1]}/${match[3]}`;
      if (!found.has(key)) found.set(key, new Map());
      found.get(key).set(Number(match[2]), name);
    }
    return found;
  }
}

function memberSeries(data, columns, x) {
  const members = [...columns.keys()].sort((a, b) => a - b);
  return members.map((m) => ({key: `member ${m}`, name: `member ${m}`, points: data.points(columns.get(m), x),
    colour: colour(m, members.length), width: 1, faint: true}));
}

function learningSeries(data) {
  const series = memberSeries(data, data.agentColumns().get("eval/fitness") || new Map(), STEP);
  series.push({key: "mean", name: "mean", points: data.points("eval/mean_fitness"), colour: "#444", width: 2.5});
  series.push({key: "best", name: "best", points: data.points("eval/best_fitness"), colour: "#d1242f", width: 2.5});
  return series;
}

/** Training metric names: those with a population mean column (train/mean_<name>). */
function trainingNames(data) {
  return data.columns.filter((c) => c.startsWith("train/mean_")).map((c) => c.slice("train/mean_".length));
}

/** Hyperparameters by name: Map(name -> Map(member -> [[generation, value]])). */
function hyperparameters(data) {
  const found = new Map();
  const add = (name, member, point) => {
    if (!found.has(name)) found.set(name, new Map());
    const byMember = found.get(name);
    if (!byMember.has(member)) byMember.set(member, []);
    byMember.get(member).push(point);
  };
  const fromEvents = data.events.filter((e) => e.event === "generation" && Array.isArray(e.members));
  if (fromEvents.length) {
    for (const e of fromEvents) {
      for (const m of e.members) {
        for (const [name, value] of Object.entries(m.hyperparameters || {})) {
          if (typeof value === "number") add(name, m.member, [e.generation, value]);
        }
      }
    }
    return found;
  }
  // No events: a per-member column without a population mean is a hyperparameter.
  const metrics = new Set([...trainingNames(data), "score", "local_steps", "fitness"]);
  const generations = data.column(GENERATION);
  for (const [key, columns] of data.agentColumns()) {
    const name = key.split("/").slice(1).join("/");
    if (!key.startsWith("train/") || metrics.has(name)) continue;
    for (const [member, column] of columns) {
      data.column(column).forEach((value, i) => add(name, member, [generations[i] ?? i + 1, value]));
    }
  }
  return found;
}

function section(title, id, ...children) {
  return el("section", {class: "card", id}, el("h2", {}, title), ...children);
}

function summaryList(summary) {
  const items = [
    ["Status", el("span", {class: `status ${String(summary.status).replace(/[^a-z_]/g, "")}`}, summary.status ?? "–")],
    ["Algorithm", summary.algorithm ?? "–"], ["Environment", summary.env ?? "–"],
    ["Population", summary.pop_size ?? "–"], ["Generations", fmt(summary.generations)],
    ["Env steps", fmt(summary.steps)], ["Best fitness", fmt(summary.best_fitness, 5)],
    ["Wall time", duration(summary.wall_seconds)], ["Started", when(summary.started)],
    summary.project === undefined ? ["Folder", summary.folder] : ["Project", summary.project],
  ];
  return el("dl", {class: "summary"}, ...items.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function filesList(id, detail) {
  const files = detail.files.map((name) => el("li", {}, downloadLink(downloadPath(id, name), name),
    name === "elite.pt" ? " (the elite agent)" : ""));
  const rows = detail.checkpoints.map((c) => el("tr", {},
    el("td", {}, c.name), el("td", {}, fmt(c.generation)), el("td", {}, fmt(c.env_steps)),
    el("td", {}, fmt(c.elite_member)),
    el("td", {}, bytes(c.files.reduce((n, f) => n + f.bytes, 0))),
    el("td", {}, downloadLink(downloadPath(id, c.path), "download (tar)"))));
  return el("div", {},
    el("ul", {class: "files"}, ...files),
    rows.length ? el("table", {class: "checkpoints"},
      el("thead", {}, el("tr", {}, ...["Checkpoint", "Generation", "Env steps", "Elite", "Size", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows)) : el("p", {class: "muted"}, "no finished checkpoint in this run folder"));
}

class ChartGrid {
  constructor(container, xLabel, height = 200) {
    this.container = container;
    this.xLabel = xLabel;
    this.height = height;
    this.charts = new Map();
  }

  update(entries) {
    for (const [name, series] of entries) {
      if (!this.charts.has(name)) {
        const box = el("div", {class: "cell", "data-metric": name}, el("h3", {}, name));
        this.container.append(box);
        this.charts.set(name, new LineChart(box, {xLabel: this.xLabel, yLabel: name, height: this.height, legend: false}));
      }
      this.charts.get(name).update(series);
    }
  }

  resize() { for (const chart of this.charts.values()) chart.draw(); }
}

/** Cards a host adds to every run page: functions (id) -> {root, refresh(detail)}. */
export const runCards = [];

export function runView(id) {
  const data = new RunData(id);
  const title = el("h1", {id: "run-title"}, id);
  const summaryBox = el("div");
  const curvesBox = el("div", {id: "curves"});
  const trainingBox = el("div", {class: "grid", id: "training"});
  const hpBox = el("div", {class: "grid", id: "hyperparameters"});
  const hpNone = el("p", {class: "muted"}, "no hyperparameters recorded yet");
  const lineageBox = el("div");
  const filesBox = el("div", {id: "files"});
  const manifestBox = el("pre", {class: "manifest", id: "manifest"});
  const cards = runCards.map((make) => make(id));
  const curves = new LineChart(curvesBox, {xLabel: "env steps", yLabel: "fitness", height: 300});
  const training = new ChartGrid(trainingBox, "env steps");
  const hps = new ChartGrid(hpBox, "generation");
  let manifest = null;
  const root = el("div", {},
    el("p", {}, el("a", {href: "#/"}, `← all ${runsList.noun}`)), title, summaryBox,
    ...cards.map((card) => card.root),
    section("Learning curves", "s-curves", el("p", {class: "muted small"}, "Evaluation fitness of the best member, the population mean and each member against the population's env steps."), curvesBox),
    section("Training metrics", "s-training", trainingBox),
    section("Hyperparameters", "s-hyperparameters", el("p", {class: "muted small"}, "Each member's hyperparameters by generation (mutations change them, selection copies them)."), hpNone, hpBox),
    section("Lineage", "s-lineage", lineageBox),
    section("Checkpoints and files", "s-files", filesBox),
    section("Resolved manifest", "s-manifest", manifestBox));

  function drawMetrics() {
    curves.update(learningSeries(data));
    const agents = data.agentColumns();
    training.update(["score", ...trainingNames(data).filter((n) => n !== "score"), "steps_per_second"].map((name) => {
      const mean = name === "steps_per_second" ? "train/steps_per_second" : `train/mean_${name}`;
      const series = memberSeries(data, agents.get(`train/${name}`) || new Map(), STEP);
      series.push({key: "mean", name: "mean", points: data.points(mean), colour: "#444", width: 2.5});
      return [name, series];
    }).filter(([, series]) => series.some((s) => s.points.some((p) => p[1] !== null))));
  }

  function drawHyperparameters() {
    const found = hyperparameters(data);
    hps.update([...found].map(([name, byMember]) => [name, [...byMember].sort((a, b) => a[0] - b[0]).map(([m, points]) => ({
      key: `member ${m}`, name: `member ${m}`, points, colour: colour(m, byMember.size), width: 1.5}))]));
    hpNone.hidden = found.size > 0;
  }

  return {
    name: "run", root,
    async refresh() {
      const [detail, newRows, newEvents] = await Promise.all([
        getJSON(runPath(id)), data.refreshMetrics(), data.refreshEvents()]);
      title.textContent = detail.summary.name;
      document.title = `${detail.summary.name} · ${document.body.dataset.product || "agilerl dashboard"}`;
      for (const card of cards) card.refresh(detail);
      summaryBox.replaceChildren(summaryList(detail.summary));
      filesBox.replaceChildren(filesList(id, detail));
      if (manifest !== detail.manifest) { manifest = detail.manifest; manifestBox.textContent = manifest || "(no manifest.yaml)"; }
      if (newRows) drawMetrics();
      if (newRows || newEvents) drawHyperparameters();
      if (newEvents || !lineageBox.children.length) lineageBox.replaceChildren(drawLineage(data.events, data.recorded));
    },
    resize() { curves.draw(); training.resize(); hps.resize(); },
  };
}
