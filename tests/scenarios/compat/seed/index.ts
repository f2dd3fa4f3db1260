// The type the seed's client program imports (`import type { registry } from "./index"`).
//
// The seed's server side (examples/progress.py) runs in perdure, in Python; this module
// only describes the same actor to TypeScript with rivetkit's `actor`/`setup`, so that
// `createClient<typeof registry>` gives typed handles (`getState()`, the `jobs` queue,
// the `progressUpdated` event). It is never executed: `import type` is erased.

import { actor, event, queue, setup } from "rivetkit";

type Progress = {
	stage: "idle" | "running" | "completed";
	completed: number;
	total: number;
};

export const progressActor = actor({
	state: {
		progress: { stage: "idle", completed: 0, total: 0 } as Progress,
		sum: 0,
	},
	events: {
		progressUpdated: event<Progress>(),
	},
	queues: {
		jobs: queue<{ value: number }>(),
	},
	actions: {
		getState: (c) => c.state,
	},
});

export const registry = setup({ use: { progressActor } });
