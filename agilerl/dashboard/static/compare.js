// Several runs on one chart: one metric (best fitness by default) against env steps.

import {el, getJSON, runPath, colour} from "./dom.js";
import {LineChart} from "./chart.js";
import {RunData} from "./run.js";

const DEFAULT = "eval/best_fitness";
const AGENT = /^(train|eval)\/agent_\d+\//;

export function compareView(ids) {
  const runs = ids.map((id) => ({id, name: id, data: new RunData(id)}));
  let metric = DEFAULT;
  const picker = el("select", {id: "metric", onchange: () => { metric = picker.value; draw(); }});
  const chartBox = el("div", {id: "compare-chart"});
  const chart = new LineChart(chartBox, {xLabel: "env steps", yLabel: metric, height: 360});
  const note = el("p", {class: "muted"});
  const root = el("div", {},
    el("p", {}, el("a", {href: "#/"}, "← all runs")), el("h1", {}, `Compare ${ids.length} runs`),
    el("div", {class: "toolbar"}, el("label", {}, "metric ", picker)), note,
    el("section", {class: "card"}, chartBox));

  function options() {
    const names = new Set();
    for (const run of runs) for (const c of run.data.columns) {
      if (!AGENT.test(c) && c !== "train/global_step") names.add(c);
    }
    const sorted = [...names].sort();
    if (sorted.join("\n") === [...picker.options].map((o) => o.value).join("\n")) return;
    picker.replaceChildren(...sorted.map((name) => el("option", {value: name, selected: name === metric}, name)));
  }

  function draw() {
    chart.yLabel = metric;
    chart.update(runs.map((run, i) => ({key: run.id, name: run.name, points: run.data.points(metric),
      colour: colour(i, runs.length), width: 2})));
  }

  return {
    name: "compare", root,
    async refresh() {
      if (ids.length < 2) note.textContent = "Select two or more runs on the runs page to compare them.";
      const changed = await Promise.all(runs.map(async (run) => {
        if (run.name === run.id) {
          try { run.name = (await getJSON(runPath(run.id))).summary.name; } catch (error) { run.name = `${run.id} (${error.message})`; return false; }
        }
        return run.data.refreshMetrics();
      }));
      options();
      if (changed.some(Boolean) || !chart.series.length) draw();
    },
    resize() { chart.draw(); },
  };
}
