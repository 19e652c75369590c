// The public face of cli/: what other folders import from it (DESIGN.md, Layout).
export {};
