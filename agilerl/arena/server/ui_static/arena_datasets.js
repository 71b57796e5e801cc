// Datasets: the user's CSV datasets for LLM fine-tuning, and an upload form.

import {el, request, failure, getJSON, fmt} from "./dom.js";

const DATASETS = "/api/cli/v1/datasets";
const FIELDS = {sft: ["prompt", "target"], preference: ["prompt", "chosen", "rejected"], reasoning: ["question", "answer"]};

function datasetRow(set) {
  const mapping = Object.entries(set.column_mapping || {}).map(([f, c]) => `${f} ← ${c}`).join(", ");
  return el("tr", {"data-dataset": set.name},
    el("td", {class: "c-name"}, set.name), el("td", {}, set.category), el("td", {}, fmt(set.rows)),
    el("td", {class: "c-description"}, mapping), el("td", {class: "c-description"}, set.description ?? ""),
    el("td", {}, set.created_at ?? "–"));
}

function uploadForm(done) {
  const name = el("input", {type: "text", required: true});
  const category = el("select", {}, ...Object.keys(FIELDS).map((c) => el("option", {value: c}, c)));
  const mapping = el("input", {type: "text", placeholder: '{"prompt": "question", "target": "answer"}'});
  const description = el("input", {type: "text"});
  const file = el("input", {type: "file", id: "dataset-file", accept: ".csv,text/csv", required: true});
  const message = el("p", {class: "message", id: "dataset-message"});
  const hint = () => { mapping.placeholder = JSON.stringify(Object.fromEntries(FIELDS[category.value].map((f) => [f, f]))); };
  category.addEventListener("change", hint);
  hint();
  const form = el("form", {class: "stack", id: "dataset-upload", onsubmit: async (event) => {
    event.preventDefault();
    const body = new FormData();
    body.append("name", name.value.trim());
    body.append("category", category.value);
    body.append("column_mapping", mapping.value.trim() || mapping.placeholder);
    if (description.value.trim()) body.append("description", description.value.trim());
    body.append("file", file.files[0]);
    try {
      const response = await request(`${DATASETS}/create`, {method: "POST", body});
      if (!response.ok) throw await failure(response);
      const data = (await response.json()).data;
      message.textContent = `Stored ${data.name}: ${data.rows} rows.`;
      message.className = "message good";
    } catch (error) {
      message.textContent = error.message;
      message.className = "message bad";
    }
    done();
  }},
  el("label", {}, "Name", name), el("label", {}, "Category", category),
  el("label", {}, "Column mapping (field → CSV column, JSON)", mapping),
  el("label", {}, "Description", description), el("label", {}, "CSV file", file),
  el("button", {type: "submit"}, "Upload"));
  return el("div", {}, form, message);
}

export function datasetsView() {
  const body = el("tbody");
  const empty = el("p", {class: "muted", hidden: true}, "No datasets yet.");
  const view = {
    name: "datasets",
    root: null,
    async refresh() {
      const data = (await getJSON(DATASETS)).data;
      body.replaceChildren(...data.map(datasetRow));
      empty.hidden = data.length > 0;
    },
  };
  view.root = el("section", {},
    el("h1", {}, "Datasets"),
    el("table", {class: "runs", id: "datasets"}, el("thead", {}, el("tr", {},
      ...["Name", "Category", "Rows", "Mapping", "Description", "Uploaded"].map((h) => el("th", {}, h)))), body),
    empty,
    el("section", {class: "card"}, el("h2", {}, "Upload a dataset"), uploadForm(() => view.refresh().catch(() => {}))));
  return view;
}
