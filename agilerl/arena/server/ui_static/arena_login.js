// Signing in: an API key pasted into the page, or the OAuth device flow (the page shows a
// code; the user approves it on /device with a key, or an admin approves it from the
// server's shell). Credentials live in this tab's sessionStorage only.

import {el, failure} from "./dom.js";

const TOKEN = "arena-token", REFRESH = "arena-refresh";
const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const CLIENT_ID = "arena-web";

export const session = {
  token: () => sessionStorage.getItem(TOKEN),
  save(token, refresh) {
    sessionStorage.setItem(TOKEN, token);
    if (refresh) sessionStorage.setItem(REFRESH, refresh);
    else sessionStorage.removeItem(REFRESH);
  },
  clear() {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.removeItem(REFRESH);
  },
};

async function oidc(path, fields) {
  const {realm} = await (await fetch("/api/ui/server", {cache: "no-store"})).json();
  return fetch(`/realms/${encodeURIComponent(realm)}/protocol/openid-connect/${path}`, {
    method: "POST", cache: "no-store", body: new URLSearchParams(fields)});
}

let renewing = null;

/** Trade the refresh token for a new pair (an access token lasts 15 minutes); false when
 * there is none or it was refused. Requests refused together share one renewal: a refresh
 * token works once. */
export function renew() {
  if (!renewing) renewing = renewOnce().finally(() => { renewing = null; });
  return renewing;
}

async function renewOnce() {
  const refresh = sessionStorage.getItem(REFRESH);
  if (!refresh) return false;
  const response = await oidc("token", {grant_type: "refresh_token", refresh_token: refresh});
  if (!response.ok) return false;
  const data = await response.json();
  session.save(data.access_token, data.refresh_token);
  return true;
}

async function signedIn(token, refresh, message) {
  const response = await fetch("/api/users/current", {cache: "no-store", headers: {Authorization: `Bearer ${token}`}});
  if (!response.ok) {
    message.textContent = (await failure(response)).message;
    return null;
  }
  session.save(token, refresh);
  return (await response.json()).data.username;
}

function deviceLogin(message, done) {
  const box = el("div", {id: "device-box"});
  let polling = false;
  async function poll(code, interval, until) {
    while (polling && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, interval * 1000));
      const response = await oidc("token", {grant_type: DEVICE_GRANT, device_code: code, client_id: CLIENT_ID});
      const data = await response.json().catch(() => ({}));
      if (response.ok) return data;
      if (data.error === "slow_down") interval += 1;
      else if (data.error !== "authorization_pending") throw new Error(data.error_description || data.error);
    }
    throw new Error("the code expired before it was approved; start again");
  }
  const startButton = el("button", {type: "button", id: "device-start", onclick: async () => {
    message.textContent = "";
    polling = true;
    try {
      const response = await oidc("auth/device", {client_id: CLIENT_ID, scope: "openid"});
      const grant = await response.json();
      if (!response.ok) throw new Error(grant.error_description || grant.error);
      box.replaceChildren(el("p", {}, "Approve the code ", el("strong", {id: "device-code"}, grant.user_code),
        " on ", el("a", {href: grant.verification_uri_complete, target: "_blank", rel: "noopener"}, "the device login page"),
        " (with an API key), or ask an admin to run ", el("code", {}, `arena-server device approve --user NAME ${grant.user_code}`), ". Waiting…"));
      const tokens = await poll(grant.device_code, Math.max(1, grant.interval), Date.now() + grant.expires_in * 1000);
      const who = await signedIn(tokens.access_token, tokens.refresh_token, message);
      if (who) done(who);
    } catch (error) {
      message.textContent = error.message;
      box.replaceChildren();
    }
  }}, "Sign in with a device code");
  return {root: el("div", {}, startButton, box), stop() { polling = false; }};
}

/** The sign-in page; `done(username)` runs once signed in. */
export function loginView(query, done) {
  const input = el("input", {type: "password", id: "api-key", autocomplete: "off", required: true, placeholder: "arena_pat_…"});
  const message = el("p", {class: "message bad", id: "login-message"},
    query.get("expired") ? "Your key was refused (revoked or expired); sign in again." : "");
  const device = deviceLogin(message, done);
  const form = el("form", {class: "stack", id: "login", onsubmit: async (event) => {
    event.preventDefault();
    message.textContent = "";
    const who = await signedIn(input.value.trim(), null, message);
    if (who) done(who);
  }},
  el("label", {}, "API key or access token", input),
  el("button", {type: "submit"}, "Sign in"));
  const root = el("section", {class: "narrow"},
    el("h1", {}, "Sign in to Arena"),
    el("p", {}, "Paste an API key (", el("code", {}, "arena-server tokens create --data-dir DIR --user NAME"),
      " prints one). It is kept in this browser tab only and sent with each request."),
    form, el("p", {class: "muted"}, "or"), device.root, message,
    el("p", {class: "muted small"}, "Approving a login of the command-line client? ",
      el("a", {href: "/device"}, "Open the device login page"), "."));
  const view = {name: "login", root, still: true, async refresh() { input.focus(); }};
  let stopped = false;  // app.js sets stop when another view replaces this one
  Object.defineProperty(view, "stop", {set(value) { stopped = value; if (value) device.stop(); }, get() { return stopped; }});
  return view;
}
