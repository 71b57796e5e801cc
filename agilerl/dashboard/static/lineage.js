// The population's family tree from events.jsonl: one column per generation, one row per
// member slot; an edge from the parent a member was copied from at selection, labelled
// with the mutation it then received.

import {el, svg, fmt} from "./dom.js";

const COLUMN = 30, ROW = 22, PAD = 40;
export const MUTATION_MARKS = {architecture: "A", new_layer: "L", parameters: "P", activation: "F", rl_hp: "H"};

/** Generations, selections and mutations gathered from events (v1). */
export function collect(events) {
  const fitness = new Map(), selections = new Map(), mutations = new Map();
  let popSize = 0, elite = null;
  for (const e of events) {
    if (e.event === "run_start") popSize = Math.max(popSize, e.pop_size || 0);
    if (e.event === "generation" && Array.isArray(e.members)) {
      fitness.set(e.generation, new Map(e.members.map((m) => [m.member, m.fitness])));
      popSize = Math.max(popSize, e.members.length);
    } else if (e.event === "selection" && Array.isArray(e.members)) {
      selections.set(e.generation, e.members);
    } else if (e.event === "mutation") {
      if (!mutations.has(e.generation)) mutations.set(e.generation, new Map());
      mutations.get(e.generation).set(e.member, e);
    } else if (e.event === "run_end") {
      elite = e.elite_member;
    }
  }
  return {fitness, selections, mutations, popSize, elite};
}

function fitnessColour(value, low, high) {
  if (value === null || value === undefined) return "#bbb";
  const t = high > low ? (value - low) / (high - low) : 0.5;
  return `hsl(${Math.round(10 + t * 120)}, 65%, ${Math.round(52 - t * 10)}%)`;
}

/** "g:m" keys of the best member of the last evaluated generation and of its ancestors. */
export function ancestry(fitness, selections) {
  const evaluated = [...fitness.keys()].sort((a, b) => a - b);
  if (!evaluated.length) return new Set();
  let g = evaluated[evaluated.length - 1], best = null;
  for (const [m, f] of fitness.get(g)) if (f !== null && f !== undefined && (best === null || f > fitness.get(g).get(best))) best = m;
  const found = new Set();
  for (let m = best; m !== null && m !== undefined; g -= 1) {
    found.add(`${g}:${m}`);
    const chosen = (selections.get(g - 1) || []).find((s) => s.member === m);
    m = chosen ? chosen.parent : null;
  }
  return found;
}

function title(text) {
  return svg("title", {}, text);
}

/** The lineage drawing (an element), or a note when the run recorded no events. */
export function drawLineage(events, recorded) {
  if (!recorded) return el("p", {class: "muted", id: "lineage-none"}, "no events recorded: this run has no events.jsonl, so its lineage is unknown");
  const {fitness, selections, mutations, popSize} = collect(events);
  const generations = [...new Set([...fitness.keys(), ...[...selections.keys()].map((g) => g + 1)])].sort((a, b) => a - b);
  if (!generations.length || !popSize) return el("p", {class: "muted", id: "lineage-none"}, "no generations recorded yet");
  const first = generations[0], last = generations[generations.length - 1];
  // colour by rank within the generation: who was selected is a matter of rank, not of scale
  const range = new Map([...fitness].map(([g, m]) => {
    const values = [...m.values()].filter((v) => v !== null && v !== undefined);
    return [g, [Math.min(...values), Math.max(...values)]];
  }));
  const line = ancestry(fitness, selections);
  const x = (g) => PAD + (g - first) * COLUMN, y = (m) => 24 + m * ROW;
  const width = x(last) + PAD, height = y(popSize - 1) + 24;
  const edges = svg("g", {class: "edges"}), path = svg("g", {class: "edges best-path"}), nodes = svg("g", {class: "nodes"}), marks = svg("g", {class: "marks"});
  const axis = svg("g", {class: "axes"});
  const every = Math.max(1, Math.ceil(40 / COLUMN) * Math.ceil((last - first + 1) / 60));
  for (const g of generations) {
    if ((g - first) % every === 0) axis.append(svg("text", {x: x(g), y: 12, "text-anchor": "middle"}, String(g)));
  }
  for (let m = 0; m < popSize; m++) axis.append(svg("text", {x: 8, y: y(m) + 4}, String(m)));
  for (const [g, members] of selections) {
    for (const s of members) {
      const clone = s.parent !== s.member;
      const ancestor = line.has(`${g + 1}:${s.member}`) && line.has(`${g}:${s.parent}`);
      const mutation = mutations.get(g)?.get(s.member);
      const kind = mutation && mutation.kind !== "none" ? mutation.kind : null;
      const edge = svg("line", {x1: x(g), y1: y(s.parent), x2: x(g + 1), y2: y(s.member),
        class: `edge ${clone ? "clone" : "keep"}${s.elite ? " elite" : ""}${ancestor ? " ancestry" : ""}`,
        "data-generation": g, "data-member": s.member, "data-parent": s.parent},
        title(`generation ${g} → ${g + 1}: member ${s.member} ${clone ? `cloned from member ${s.parent}` : "kept"}${s.elite ? " (elite)" : ""}${kind ? `; mutation ${kind}: ${mutation.description || ""}` : ""}`));
      (ancestor ? path : edges).append(edge);
      if (kind) {
        marks.append(svg("text", {x: x(g + 1) - 13, y: y(s.member) - 5, class: `mark ${kind}`, "data-kind": kind},
          MUTATION_MARKS[kind] || "?", title(`${kind}: ${mutation.description || ""}`)));
      }
    }
  }
  for (const g of generations) {
    const values = fitness.get(g);
    for (let m = 0; m < popSize; m++) {
      const value = values ? values.get(m) : undefined;
      nodes.append(svg("circle", {cx: x(g), cy: y(m), r: 6, fill: values ? fitnessColour(value, ...range.get(g)) : "none",
        class: `${values ? "node" : "node pending"}${line.has(`${g}:${m}`) ? " ancestry" : ""}`, "data-generation": g, "data-member": m},
        title(`generation ${g}, member ${m}: ${values ? `fitness ${fmt(value, 5)}` : "not evaluated (selected after the last evaluation)"}`)));
    }
  }
  const drawing = svg("svg", {width, height, class: "lineage"}, axis, edges, path, nodes, marks);
  const legend = el("p", {class: "muted small"},
    "Rows are population slots, columns generations; colour is fitness within the generation (red lowest, green highest). ",
    "Grey lines keep a member, blue lines clone another member into the slot; the orange path leads to the best member of the last generation. Marks: ",
    Object.entries(MUTATION_MARKS).map(([k, v]) => `${v} ${k}`).join(", "), ". Hover for details.");
  const scroller = el("div", {class: "scroll", id: "lineage"}, drawing);
  requestAnimationFrame(() => { scroller.scrollLeft = scroller.scrollWidth; });
  return el("div", {}, legend, scroller);
}
