import { describe, expect, it } from "vitest";
import { Invitations, MAX_INVITATION_LENGTH } from "../../src/rooms/invites.js";
import { displayName, MAX_NAME_LENGTH } from "../../src/rooms/rooms.js";

const invitations = new Invitations("a secret of at least thirty-two characters");
const invitation = {
  roomName: "api-0123456789abcdef0123",
  identity: "client-0a1b2c3d4e5f",
  language: "pt-BR",
  host: false,
};

describe("meeting invitations", () => {
  it("round-trip a room, a participant, a language and the creator's mark in a short code", () => {
    const code = invitations.encode(invitation);
    expect(code).toMatch(/^[A-Za-z0-9_-]+$/u);
    expect(code.length).toBeLessThan(60);
    expect(invitations.decode(code)).toEqual(invitation);
    const host = { ...invitation, language: undefined, host: true };
    expect(invitations.decode(invitations.encode(host))).toEqual(host);
  });

  it("refuse any code this service did not sign, changed by a single bit", () => {
    const code = invitations.encode(invitation);
    const bytes = Buffer.from(code, "base64url");
    for (let i = 0; i < bytes.length; i += 1) {
      const changed = Buffer.from(bytes);
      changed[i]! ^= 1;
      expect(invitations.decode(changed.toString("base64url")), `byte ${i}`).toBeUndefined();
    }
    expect(new Invitations("another secret, also thirty-two characters").decode(code)).toBeUndefined();
    for (const bad of ["", "x", "!!!!", code.slice(0, 20), "A".repeat(MAX_INVITATION_LENGTH + 1)])
      expect(invitations.decode(bad)).toBeUndefined();
  });

  it("are made only for the service's own room names and identities", () => {
    expect(() => invitations.encode({ ...invitation, roomName: "someone-elses-room" })).toThrow();
    expect(() => invitations.encode({ ...invitation, identity: "alice" })).toThrow();
    expect(() => invitations.encode({ ...invitation, language: "x".repeat(36) })).toThrow();
  });
});

describe("display names", () => {
  it("keep what a person typed, without control or bidi characters, cut to a bounded length", () => {
    expect(displayName("  Ana  María ")).toBe("Ana María");
    expect(displayName("Ma\u202Ellory\u0007\n<b>x</b>")).toBe("Ma llory <b>x</b>");
    expect(displayName("\u200B\u202E \t")).toBeUndefined();
    expect(displayName("")).toBeUndefined();
    expect([...displayName("😀".repeat(100))!]).toHaveLength(MAX_NAME_LENGTH);
  });
});
