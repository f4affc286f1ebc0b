"""A tracker keeping per-object results in nested dicts, filled by methods that call each other
inside loops: the shape of a video-segmentation predictor whose analysis once grew without
bound (every read of a dict built from other dicts multiplied the values it could hold)."""

import torch
import torch.nn.functional as F


class Tracker:
    def start(self, source):
        self.build_state(self)

    @staticmethod
    def build_state(tracker):
        tracker.state = tracker.new_state(tracker.frames)

    def new_state(frames):
        """An empty tracking state."""
        state = {
            "inputs_per_obj": {},
            "merged_frames": {
            },
            "seen": set(),
        }
        return state

    def prepare(self, state=None):
        """Merge every object's pending outputs into the shared results before tracking."""
        state = state or self.state
        results = state["results"]
        for cond in (False, True):
            for frame in pending:
                merged = self.merge_objects(
                )
                results[key][frame] = merged
                self.split_per_object(frame, merged, key, state=state)
                if self.clear_around and (self.clear_many or count <= 1):
                    self.clear_near(frame, state)

    def cached_positions(self, positions, state=None):
        """Keep one copy of the positional encodings, expanded to the batch when asked."""
        state = state or self.state
        constants = state["constants"]
        if positions is not None:
                cached = [p[:1].clone() for p in positions]
                constants["positions"] = cached
                cached = constants["positions"]
                positions = [p.expand(count, -1, -1, -1) for p in cached]
        return positions

    def merge_objects(
        self,
    ):
        """Combine the pending outputs of every object into one output for the frame."""
        state = state or self.state
        merged = {
            "features": None,
            "pointer": torch.full(
                size=(count, self.model.dim),
            ),
        }
        for i in range(count):
            pending_i = state["pending_per_obj"][i]
            done_i = state["results_per_obj"][i]
            out = (
                pending_i[key].get(frame)
                or done_i["cond"].get(frame)
                or done_i["other"].get(frame)
            )
            if out is None:
                    merged["pointer"][i : i + 1] = self.empty_pointer(
                    )
            merged["masks"][i : i + 1] = out["masks"]
            merged["pointer"][i : i + 1] = out["pointer"]
            big = F.interpolate(
            )
            merged["features"], merged["positions"] = self.encode_memory(
            )
        return merged

    def encode_memory(
    ):
        """Run the memory encoder again on the merged masks."""
        features, positions = self.model.encode(
        )
        positions = self.cached_positions(positions, state)
        return features.to(
        ), positions

    def split_per_object(
        self, frame, merged, key, state=None
    ):
        """Slices of the merged output, one per object, sharing its storage."""
        for i, per_obj in state["results_per_obj"].items():
            sliced = {
                "masks": merged["masks"][window],
                "pointer": merged["pointer"][window],
            }
            if features is not None:
                sliced["positions"] = [p[window] for p in positions]
            per_obj[key][frame] = sliced
