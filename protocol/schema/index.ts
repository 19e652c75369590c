// The public face of protocol/schema/: what other folders import from it (DESIGN.md, Layout).
export { describeIssue, type IssueDescription } from './describeIssue.js';
