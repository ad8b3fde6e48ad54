// Passkeys in the console: adding one on /me, and signing a vote on a
// request page. The server begins and checks every ceremony; this file
// only hands the browser the server's options and the server the
// browser's answer. Before a vote is signed it hashes the payload bytes
// the page shows and the ballot it shows, and asks for the passkey only
// when they are what the challenge commits to.
"use strict";

(() => {
  const b64url = {
    decode(s) {
      s = s.replace(/-/g, "+").replace(/_/g, "/");
      return bytes(atob(s + "===".slice((s.length + 3) % 4)));
    },
    encode(buf) {
      let bin = "";
      for (const b of new Uint8Array(buf)) bin += String.fromCharCode(b);
      return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    },
  };

  function bytes(bin) {
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  async function sha256(data) {
    return new Uint8Array(await crypto.subtle.digest("SHA-256", data));
  }

  function hex(b) {
    return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  // The server's options (go-webauthn's JSON) with their binary fields
  // as the browser takes them.
  function publicKey(options) {
    const pk = options.publicKey;
    pk.challenge = b64url.decode(pk.challenge);
    if (pk.user) pk.user.id = b64url.decode(pk.user.id);
    for (const c of pk.excludeCredentials || []) c.id = b64url.decode(c.id);
    for (const c of pk.allowCredentials || []) c.id = b64url.decode(c.id);
    return pk;
  }

  // The browser's PublicKeyCredential as JSON, its binary fields base64url.
  function credentialJSON(c) {
    const r = c.response;
    const out = {
      id: c.id,
      rawId: b64url.encode(c.rawId),
      type: c.type,
      clientExtensionResults: c.getClientExtensionResults(),
      response: { clientDataJSON: b64url.encode(r.clientDataJSON) },
    };
    if (c.authenticatorAttachment) out.authenticatorAttachment = c.authenticatorAttachment;
    if (r.attestationObject) {
      out.response.attestationObject = b64url.encode(r.attestationObject);
      if (r.getTransports) out.response.transports = r.getTransports();
    }
    if (r.signature) {
      out.response.authenticatorData = b64url.encode(r.authenticatorData);
      out.response.signature = b64url.encode(r.signature);
      if (r.userHandle) out.response.userHandle = b64url.encode(r.userHandle);
    }
    return out;
  }

  // A refusal from the server, with its code.
  class Refused extends Error {
    constructor(message, code) {
      super(message);
      this.code = code;
    }
  }

  async function post(url, body) {
    const res = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    });
    if (res.status === 401) throw new Refused("You are signed out: sign in again, then start over.");
    let data = {};
    try {
      data = await res.json();
    } catch {
      // A page, not JSON: the message below says what happened.
    }
    if (!res.ok) throw new Refused(data.error || `The server answered ${res.status}.`, data.code);
    return data;
  }

  // What went wrong, for people; nothing was voted or added.
  function problem(err, what) {
    switch (err && err.name) {
      case "NotAllowedError":
        return `The passkey prompt was cancelled or timed out: ${what}. Start again when you are ready.`;
      case "InvalidStateError":
        return `This device already holds one of your passkeys: ${what}.`;
      case "SecurityError":
        return `The browser refused passkeys on this page's address: ${what}.`;
      case "AbortError":
        return `The passkey prompt was interrupted: ${what}.`;
    }
    return `${err && err.message ? err.message : String(err)} (${what}).`;
  }

  // Whether passkeys can work here; otherwise why not, in words.
  function unusable(origin) {
    if (!window.PublicKeyCredential || !navigator.credentials || !window.crypto || !crypto.subtle) {
      return "This browser cannot use passkeys (it has no WebAuthn here).";
    }
    if (origin && location.origin !== origin) {
      return `Passkeys work on ${origin}: open this page there.`;
    }
    return "";
  }

  function say(box, text, bad) {
    const out = box.querySelector("[data-passkey-status]");
    out.textContent = text;
    out.classList.toggle("bad", !!bad);
  }

  // Adding a passkey on /me.
  async function enrol(box, button) {
    const why = unusable(box.dataset.passkeyOrigin);
    if (why) return say(box, `${why} No passkey was added.`, true);
    button.disabled = true;
    try {
      say(box, "Follow your browser's prompt to make the passkey…");
      const start = await post("/me/passkeys/begin", {});
      const cred = await navigator.credentials.create({ publicKey: publicKey(start.options) });
      say(box, "Checking the new passkey…");
      const done = await post("/me/passkeys/finish", { ceremony: start.ceremony, credential: credentialJSON(cred) });
      location.assign(done.next);
    } catch (err) {
      if (err.code === "STEP_UP") {
        // The sign-in grew too old since the page was shown: the page
        // now offers to sign in again.
        location.assign("/me");
        return;
      }
      say(box, problem(err, "no passkey was added"), true);
      button.disabled = false;
    }
  }

  // A vote's confirmation: hash the bytes the page shows and the ballot
  // it shows, and offer the passkey only when the ballot names those
  // bytes and the challenge commits to that ballot.
  async function check(box) {
    if (box.dataset.checked) return;
    box.dataset.checked = "yes";
    const out = box.querySelector("[data-payload-check]");
    const why = unusable(box.dataset.passkeyOrigin);
    if (why) {
      out.textContent = "";
      return say(box, `${why} Nothing was voted.`, true);
    }
    const exact = document.querySelector("[data-exact-bytes]");
    if (!exact) return say(box, "The page shows no payload to check: reload it. Nothing was voted.", true);
    const sum = hex(await sha256(bytes(atob(exact.dataset.exactBytes))));
    out.textContent = `Your browser computed SHA-256 ${sum} from the exact bytes on this page.`;
    if (sum !== box.dataset.payloadSha256) {
      return say(box, "Those bytes are not the ones the ballot names: nothing will be signed. Reload the page.", true);
    }
    const challenge = publicKey(JSON.parse(box.dataset.options)).challenge;
    const ballot = await sha256(new TextEncoder().encode(box.dataset.ballot));
    if (hex(challenge.slice(challenge.length - 32)) !== hex(ballot)) {
      return say(box, "The challenge does not commit to the ballot shown: nothing will be signed. Reload the page.", true);
    }
    out.textContent += " It is the one the ballot names.";
    const button = box.querySelector("[data-passkey-sign]");
    button.disabled = false;
    button.focus();
  }

  async function vote(box, button) {
    button.disabled = true;
    try {
      say(box, "Follow your browser's prompt to sign with your passkey…");
      const cred = await navigator.credentials.get({ publicKey: publicKey(JSON.parse(box.dataset.options)) });
      say(box, "Casting your signed vote…");
      const done = await post("/request/passkey", { ceremony: box.dataset.ceremony, credential: credentialJSON(cred) });
      location.assign(done.next);
    } catch (err) {
      say(box, problem(err, "nothing was voted"), true);
      // The server takes a ceremony's answer once: after it refused one,
      // start again from the request (Cancel); a prompt cancelled in the
      // browser may be tried again.
      if (!(err instanceof Refused)) button.disabled = false;
    }
  }

  function scan() {
    for (const box of document.querySelectorAll("[data-passkey-vote]")) check(box);
  }

  document.addEventListener("click", (ev) => {
    const enrolButton = ev.target.closest("[data-passkey-enrol]");
    if (enrolButton) return enrol(enrolButton.closest("#passkeys"), enrolButton);
    const sign = ev.target.closest("[data-passkey-sign]");
    if (sign) vote(sign.closest("[data-passkey-vote]"), sign);
  });
  document.addEventListener("DOMContentLoaded", scan);
  document.addEventListener("htmx:afterSettle", scan);
})();
