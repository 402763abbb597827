"""Statistics that a run of any length keeps in O(1) memory: quantiles and a linear trend.

A soak runs for days; its summary must not come from every round held in memory. `Quantiles`
is exact while it has seen at most EXACT_CAP values (short runs print what they always printed)
and then folds them into a log-spaced histogram whose buckets are 1 % wide, so a p99 is within
1 % of the true one. `Trend` is an ordinary least-squares line through (x, y) kept as running
sums, with the slope's standard error from the residuals: enough to say "growing, by this
much, with this interval" without keeping the points.
"""
from __future__ import annotations

import math

from nccl_bench.core.stats import percentile

EXACT_CAP = 4096  # values kept exactly; beyond, the histogram (a few KB whatever the count)
BUCKET_GROWTH = 1.01  # each histogram bucket is 1 % wider than the one below it


class Quantiles:
    """Streaming quantiles of non-negative values (None and NaN ignored)."""

    def __init__(self) -> None:
        self.n = 0
        self.max: float | None = None
        self._exact: list[float] | None = []
        self._buckets: dict[int, int] = {}  # log-bucket index -> count (zeros under index None)
        self._zeros = 0

    def add(self, v: float | None) -> None:
        if v is None or math.isnan(v):
            return
        self.n += 1
        self.max = v if self.max is None else max(self.max, v)
        if self._exact is not None:
            self._exact.append(v)
            if len(self._exact) > EXACT_CAP:
                for x in self._exact:
                    self._bucket(x)
                self._exact = None
            return
        self._bucket(v)

    def _bucket(self, v: float) -> None:
        if v <= 0:
            self._zeros += 1
            return
        i = math.floor(math.log(v) / math.log(BUCKET_GROWTH))
        self._buckets[i] = self._buckets.get(i, 0) + 1

    def quantile(self, q: float) -> float | None:
        if self._exact is not None:
            return percentile(self._exact, q)
        target = q * (self.n - 1)  # the order statistic percentile() interpolates at
        seen = self._zeros
        if target < seen:
            return 0.0
        for i in sorted(self._buckets):
            seen += self._buckets[i]
            if target < seen:
                return BUCKET_GROWTH ** (i + 0.5)  # the bucket's geometric middle
        return self.max


# Two-sided 99 % Student t quantiles by degrees of freedom (1..30); beyond 30 the normal's 2.576.
_T99 = (63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012, 2.977,
        2.947, 2.921, 2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763,
        2.756, 2.750)


def t99(df: int) -> float:
    return _T99[df - 1] if 1 <= df <= len(_T99) else 2.576


_LAGGED = ("_lxx", "_lxy", "_lyx", "_lyy", "_lx", "_ly", "_px", "_py")


class Trend:
    """y against x by least squares, from running sums (x and y shifted by their first values so the
    sums stay small). slope() is per unit of x; interval() is its two-sided 99 % interval, widened
    for the residuals' lag-1 autocorrelation (memory held by work in flight rises and falls over
    many samples: treating those as independent would make an interval too narrow)."""

    def __init__(self) -> None:
        self.n = 0
        self._x0 = self._y0 = 0.0
        self._sx = self._sy = self._sxx = self._sxy = self._syy = 0.0
        # sums over consecutive pairs (t-1, t): x_t x_t-1, x_t y_t-1, y_t x_t-1, y_t y_t-1, x_t, y_t, x_t-1, y_t-1
        self._lxx = self._lxy = self._lyx = self._lyy = self._lx = self._ly = self._px = self._py = 0.0
        self.first_x: float | None = None
        self.last_x: float | None = None
        self.last_y: float | None = None

    def add(self, x: float, y: float) -> None:
        if self.n == 0:
            self._x0, self._y0, self.first_x = float(x), float(y), float(x)
        dx, dy = x - self._x0, y - self._y0
        if self.n:
            px, py = self.last_x - self._x0, self.last_y - self._y0
            self._lxx += dx * px
            self._lxy += dx * py
            self._lyx += dy * px
            self._lyy += dy * py
            self._lx += dx
            self._ly += dy
            self._px += px
            self._py += py
        self.n += 1
        self._sx += dx
        self._sy += dy
        self._sxx += dx * dx
        self._sxy += dx * dy
        self._syy += dy * dy
        self.last_x, self.last_y = float(x), float(y)

    def _centred(self) -> tuple[float, float, float]:
        n = self.n
        return (self._sxx - self._sx ** 2 / n, self._sxy - self._sx * self._sy / n, self._syy - self._sy ** 2 / n)

    def slope(self) -> float | None:
        if self.n < 2:
            return None
        sxx, sxy, _ = self._centred()
        return sxy / sxx if sxx > 0 else None

    def stderr(self) -> float | None:
        """The slope's standard error (None under 3 points)."""
        if self.n < 3:
            return None
        sxx, sxy, syy = self._centred()
        if sxx <= 0:
            return None
        sse = max(syy - sxy * sxy / sxx, 0.0)
        return math.sqrt(sse / (self.n - 2) / sxx)

    def autocorrelation(self) -> float | None:
        """Lag-1 autocorrelation of the residuals (None under 4 points or with no residual at all)."""
        b = self.slope()
        if b is None or self.n < 4:
            return None
        n = self.n
        a = (self._sy - b * self._sx) / n  # intercept, in shifted units
        sse = self._syy - 2 * a * self._sy - 2 * b * self._sxy + n * a * a + 2 * a * b * self._sx + b * b * self._sxx
        if sse <= 1e-12 * max(self._syy, 1.0):
            return None
        # sum of e_t e_t-1 with e = y - a - b x, expanded over the pairs' sums
        m = n - 1
        lag = (self._lyy - a * self._ly - b * self._lxy - a * self._py + m * a * a + a * b * self._px
               - b * self._lyx + a * b * self._lx + b * b * self._lxx)
        return max(-1.0, min(1.0, lag / sse))

    def interval(self) -> tuple[float, float] | None:
        s, se = self.slope(), self.stderr()
        if s is None or se is None:
            return None
        rho = self.autocorrelation() or 0.0
        rho = min(max(rho, 0.0), 0.95)  # only positive correlation widens; capped so a trend stays testable
        half = t99(max(1, int((self.n - 2) * (1 - rho) / (1 + rho)))) * se * math.sqrt((1 + rho) / (1 - rho))
        return s - half, s + half

    def state(self) -> dict:
        """The sums, JSON-ready (to gather a trend from another rank)."""
        return {k: getattr(self, k) for k in ("n", "_x0", "_y0", "_sx", "_sy", "_sxx", "_sxy", "_syy",
                                              "first_x", "last_x", "last_y", *_LAGGED)}

    @classmethod
    def from_state(cls, state: dict) -> "Trend":
        t = cls()
        for k, v in state.items():
            setattr(t, k, v)
        return t
