export * from "./frames.js";
