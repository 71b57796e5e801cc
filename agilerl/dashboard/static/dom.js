// DOM and formatting helpers. Every string from a run (names, manifest text, hyperparameter
// names) reaches the page through text nodes or setAttribute, never through HTML parsing.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(node, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: el("a", {href: "#/"}, "text", otherNode). */
export function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element, built like el(). */
export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** A number for people: 3 significant digits, k/M/G for large magnitudes. */
export function fmt(value, digits = 3) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (typeof value !== "number") return String(value);
  const size = Math.abs(value);
  if (size >= 1e9) return (value / 1e9).toPrecision(digits) + "G";
  if (size >= 1e6) return (value / 1e6).toPrecision(digits) + "M";
  if (size >= 1e4) return (value / 1e3).toPrecision(digits) + "k";
  if (Number.isInteger(value) || size >= 10 ** digits) return String(Math.round(value));
  if (size !== 0 && (size < 1e-3)) return value.toExponential(digits - 1);
  return String(Number(value.toPrecision(digits)));
}

/** A tick label: as many decimals as the tick spacing `step` needs. */
export function tick(value, step) {
  const size = Math.abs(value);
  for (const [scale, suffix] of [[1e9, "G"], [1e6, "M"], [1e4, "k"]]) {
    if (size >= scale) {
      const unit = scale === 1e4 ? 1e3 : scale;
      return (value / unit).toFixed(Math.max(0, -Math.floor(Math.log10(step / unit) + 1e-9))) + suffix;
    }
  }
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  if (decimals > 6) return value.toExponential(1);
  return value.toFixed(decimals);
}

/** Bytes as B, kB, MB or GB. */
export function bytes(count) {
  if (count < 1e3) return `${count} B`;
  const [scale, unit] = count < 1e6 ? [1e3, "kB"] : count < 1e9 ? [1e6, "MB"] : [1e9, "GB"];
  return `${(count / scale).toFixed(1)} ${unit}`;
}

/** Seconds as "1h 02m", "3m 05s" or "12s". */
export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  if (h) return `${h}h ${String(m).padStart(2, "0")}m`;
  if (m) return `${m}m ${String(r).padStart(2, "0")}s`;
  return `${r}s`;
}

/** Epoch seconds as a local date and time. */
export function when(epoch) {
  if (!epoch) return "–";
  return new Date(epoch * 1000).toLocaleString();
}

/** Colour number i of n, spread around the hue circle. */
export function colour(i, n) {
  const hue = Math.round((i * 360) / Math.max(n, 1) + 200) % 360;
  return `hsl(${hue}, 62%, 48%)`;
}

/** Where the run API lives and how to call it. A host that mounts the page behind its own
 * authentication (the Arena server) sets `base`, returns its credentials from `headers()`
 * and is told of a refused request (401) through `unauthorized()`, which resolves to true
 * when it renewed the credentials (the request is then sent once more). */
export const api = {base: "/api", headers: () => ({}), unauthorized: async () => false};

/** fetch() with the host's credentials; a 401 is reported to the host. */
export async function request(path, options = {}, again = true) {
  const response = await fetch(path, {cache: "no-store", ...options,
    headers: {...api.headers(), ...(options.headers || {})}});
  if (response.status === 401 && await api.unauthorized() && again) return request(path, options, false);
  return response;
}

/** The error message of a failed response (the JSON `error`, else the status). */
export async function failure(response) {
  const data = await response.json().catch(() => ({}));
  return new Error(data.error || `${response.status} ${response.statusText}`);
}

/** GET a JSON API path; throws with the server's message on an error status. */
export async function getJSON(path) {
  const response = await request(path);
  if (!response.ok) throw await failure(response);
  return response.json();
}

/** The API path of one run (the id is one percent-encoded segment). */
export function runPath(id, rest = "") {
  return `${api.base}/runs/${encodeURIComponent(id)}${rest}`;
}

/** Save a download: a plain link when the host needs no credentials, else fetched with
 * them (a link cannot carry a header) and handed to the browser as a file. */
export async function download(href, name) {
  const response = await request(href);
  if (!response.ok) throw await failure(response);
  const disposition = response.headers.get("Content-Disposition") || "";
  const named = /filename="([^"]+)"/.exec(disposition);
  const url = URL.createObjectURL(await response.blob());
  const link = el("a", {href: url, download: named ? named[1] : name || "download"});
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** A download link for `href` that works with or without the host's credentials. */
export function downloadLink(href, label) {
  const link = el("a", {href, download: "", onclick: (event) => {
    if (!Object.keys(api.headers()).length) return;  // the browser follows the link itself
    event.preventDefault();
    download(href).catch((error) => { link.title = error.message; link.classList.add("failed"); });
  }}, label);
  return link;
}

/** A download link for a file of a run ("checkpoints/gen..." keeps its slashes). */
export function downloadPath(id, relative) {
  return runPath(id, "/download/" + relative.split("/").map(encodeURIComponent).join("/"));
}
